package jepsen

import (
	"sync"
	"time"
)

// outcome is how an operation ended, as the client reported it.
type outcome int

const (
	// okOutcome: the operation took effect (or, for a read, returned).
	okOutcome outcome = iota
	// failOutcome: the operation definitely did not take effect.
	failOutcome
	// unknownOutcome: a write may or may not have taken effect (the client
	// said ErrAmbiguous, or the deadline passed with it in flight).
	unknownOutcome
)

func (o outcome) String() string {
	return [...]string{"ok", "fail", "info"}[o]
}

// opKind is a register operation.
type opKind string

const (
	opGet opKind = "get"
	opPut opKind = "put"
	opCAS opKind = "cas"
)

// regInput is a register operation's arguments. For a CAS, expectAbsent
// or expect is the condition and value the new value.
type regInput struct {
	Kind         opKind `json:"kind"`
	Key          string `json:"key"`
	Value        string `json:"value,omitempty"`
	Expect       string `json:"expect,omitempty"`
	ExpectAbsent bool   `json:"expect_absent,omitempty"`
}

// regOutput is what the operation returned: for a get, found and value; for
// a CAS, whether it swapped and, when it did not, the key's value.
type regOutput struct {
	Swapped bool   `json:"swapped,omitempty"`
	Found   bool   `json:"found,omitempty"`
	Value   string `json:"value,omitempty"`
	Unknown bool   `json:"unknown,omitempty"`
}

// op is one recorded operation. Times are nanoseconds since the run's
// start (monotonic).
type op struct {
	Worker int `json:"worker"`
	// Process numbers a worker's life between indeterminate operations:
	// after one, the worker carries on as a new process (Jepsen's
	// convention), since the pending operation may still be in flight.
	Process int       `json:"process"`
	Input   regInput  `json:"input"`
	Output  regOutput `json:"output"`
	Outcome string    `json:"outcome"`
	Err     string    `json:"error,omitempty"`
	Call    int64     `json:"call"`
	Return  int64     `json:"return"`

	outcome outcome
}

// history collects operations from concurrent workers.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []op
}

func newHistory(start time.Time) *history { return &history{start: start} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(o op) {
	o.Outcome = o.outcome.String()
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

func (h *history) snapshot() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]op(nil), h.ops...)
}

// span is an interval of the run (nanoseconds since its start) during
// which a fault was active.
type span struct {
	Name  string `json:"name"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}
