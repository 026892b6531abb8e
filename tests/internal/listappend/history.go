package listappend

import (
	"fmt"
	"strings"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// OpKind is a micro-operation's function.
type OpKind string

const (
	// Append adds Value at the end of Key's list.
	Append OpKind = "append"
	// Read returns Key's whole list (empty when the key does not exist).
	Read OpKind = "r"
)

// MicroOp is one step of a transaction.
type MicroOp struct {
	Kind OpKind `json:"f"`
	Key  string `json:"key"`
	// Value is the appended element (Append). The workload makes every
	// element unique per key; the checker relies on it.
	Value int `json:"value,omitempty"`
	// List is what a Read returned, in a transaction that completed ok.
	List []int `json:"list,omitempty"`
}

func (m MicroOp) String() string {
	if m.Kind == Append {
		return fmt.Sprintf("append(%s, %d)", m.Key, m.Value)
	}
	return fmt.Sprintf("r(%s)=%v", m.Key, m.List)
}

// Txn is one recorded transaction. Times are in any one clock (the
// workload records nanoseconds since its start) and only compared.
type Txn struct {
	// Process is the worker that ran it. A worker carries on as a new
	// process after an indeterminate transaction, which may still be in
	// flight (Jepsen's convention); the checker only prints it.
	Process int           `json:"process"`
	Outcome txnkv.Outcome `json:"type"`
	Ops     []MicroOp     `json:"ops"`
	// Invoke is when the client started the transaction, Complete when it
	// learnt the outcome (meaningless for Info: it may take effect later).
	Invoke   int64  `json:"invoke"`
	Complete int64  `json:"complete"`
	Err      string `json:"error,omitempty"`
}

// describe names transaction i of history h for reports.
func describe(h []Txn, i int) string {
	t := h[i]
	ops := make([]string, len(t.Ops))
	for j, m := range t.Ops {
		ops[j] = m.String()
	}
	when := fmt.Sprintf("%d..%d", t.Invoke, t.Complete)
	if t.Outcome == txnkv.Info {
		when = fmt.Sprintf("%d..?", t.Invoke)
	}
	return fmt.Sprintf("T%d (process %d, %s, %s): %s", i, t.Process, t.Outcome, when, strings.Join(ops, " "))
}
