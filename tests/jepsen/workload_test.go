package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/client"
)

// Limits that keep every per-key history checkable by porcupine on this
// machine (measured: a key with ~1,000 operations from ~10 clients and a
// handful of indeterminate writes checks in well under a second; the search
// grows exponentially with the indeterminate writes, which stay pending to
// the end of the history). A key that reaches either limit is retired and
// its slot moves to a fresh key.
const (
	maxOpsPerKey   = 1000
	maxIndetPerKey = 8
	// opTimeout is each operation's deadline: long enough to ride out an
	// election, short enough that a fault yields indeterminate operations
	// rather than stalled workers.
	opTimeout = 3 * time.Second
	// thinkTime spaces a worker's operations: the machine is shared, and a
	// few hundred operations a second fill the per-key histories quickly
	// enough.
	thinkTime = 10 * time.Millisecond
)

// outcomeOf classifies a client error. ErrUnavailable, ErrInvalidArgument
// and ErrResourceExhausted are documented as "not applied"; every other
// failure of a write is treated as indeterminate (ErrAmbiguous by contract,
// ErrInternal because nothing promises it was not applied).
func outcomeOf(err error, write bool) outcome {
	switch {
	case err == nil:
		return okOutcome
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrInvalidArgument),
		errors.Is(err, client.ErrResourceExhausted):
		return failOutcome
	case !write:
		return failOutcome
	default:
		return unknownOutcome
	}
}

// keySlot is one hot key of the register workload.
type keySlot struct {
	key   string
	ops   int
	indet int
	gen   int
	// last is the value a worker last saw there, the usual CAS condition.
	last      string
	lastFound bool
}

// registerWorkload runs get/put/CAS over a few hot keys.
type registerWorkload struct {
	h      *history
	mu     sync.Mutex
	slots  []*keySlot
	values atomic.Int64
}

func newRegisterWorkload(h *history, keys int) *registerWorkload {
	w := &registerWorkload{h: h}
	for i := range keys {
		w.slots = append(w.slots, &keySlot{key: fmt.Sprintf("reg/%d/0", i)})
	}
	return w
}

// pick chooses a slot, retiring its key if it is full, and returns the key
// and a CAS condition.
func (w *registerWorkload) pick(rng *rand.Rand) (slot int, key, last string, lastFound bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	slot = rng.IntN(len(w.slots))
	s := w.slots[slot]
	if s.ops >= maxOpsPerKey || s.indet >= maxIndetPerKey {
		s.gen++
		*s = keySlot{key: fmt.Sprintf("reg/%d/%d", slot, s.gen), gen: s.gen}
	}
	s.ops++
	return slot, s.key, s.last, s.lastFound
}

func (w *registerWorkload) note(slot int, key string, o op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slots[slot]
	if s.key != key {
		return
	}
	switch {
	case o.outcome == unknownOutcome:
		s.indet++
	case o.outcome != okOutcome:
	case o.Input.Kind == opGet || (o.Input.Kind == opCAS && !o.Output.Swapped):
		s.last, s.lastFound = o.Output.Value, o.Output.Found
	default:
		s.last, s.lastFound = o.Input.Value, true
	}
}

// worker runs operations until ctx ends.
func (w *registerWorkload) worker(ctx context.Context, id int, sess *session, rng *rand.Rand) {
	process := 0
	for ctx.Err() == nil {
		cl := sess.get()
		slot, key, last, lastFound := w.pick(rng)
		in := regInput{Key: key}
		switch r := rng.IntN(10); {
		case r < 4:
			in.Kind = opGet
		case r < 7:
			in.Kind = opPut
			in.Value = fmt.Sprint(w.values.Add(1))
		default:
			in.Kind = opCAS
			in.Value = fmt.Sprint(w.values.Add(1))
			in.Expect, in.ExpectAbsent = last, !lastFound
		}
		o := op{Worker: id, Process: process, Input: in, Call: w.h.now()}
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		var err error
		switch in.Kind {
		case opGet:
			var v []byte
			v, o.Output.Found, err = cl.Get(octx, []byte(key))
			o.Output.Value = string(v)
		case opPut:
			err = cl.Put(octx, []byte(key), []byte(in.Value))
		case opCAS:
			cond := client.IfValue([]byte(in.Expect))
			if in.ExpectAbsent {
				cond = client.IfAbsent()
			}
			var res client.CASResult
			res, err = cl.CompareAndSwap(octx, []byte(key), cond, []byte(in.Value))
			o.Output = regOutput{Swapped: res.Succeeded, Found: res.Found, Value: string(res.Current)}
		}
		cancel()
		o.Return = w.h.now()
		o.outcome = outcomeOf(err, in.Kind != opGet)
		if err != nil {
			o.Err = err.Error()
			o.Output = regOutput{}
		}
		w.h.add(o)
		w.note(slot, key, o)
		if o.outcome == unknownOutcome {
			process++
		}
		if err != nil {
			pause(ctx, 50*time.Millisecond) // a failing cluster is not hammered
		}
		pause(ctx, thinkTime)
	}
}

// setWorkload adds unique elements (keys under set/) and remembers each
// add's outcome for the final read.
type setWorkload struct {
	h     *history
	mu    sync.Mutex
	added map[string]setAdd
}

const opAdd opKind = "add"

func newSetWorkload(h *history) *setWorkload {
	return &setWorkload{h: h, added: map[string]setAdd{}}
}

func (w *setWorkload) worker(ctx context.Context, id int, sess *session) {
	for n := 0; ctx.Err() == nil; n++ {
		cl := sess.get()
		key, value := fmt.Sprintf("set/%02d/%07d", id, n), fmt.Sprint(n)
		o := op{Worker: id, Input: regInput{Kind: opAdd, Key: key, Value: value}, Call: w.h.now()}
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		version, err := cl.PutVersioned(octx, []byte(key), []byte(value))
		cancel()
		o.Return = w.h.now()
		o.outcome = outcomeOf(err, true)
		if err != nil {
			o.Err = err.Error()
		}
		w.h.add(o)
		w.mu.Lock()
		w.added[key] = setAdd{value: value, outcome: o.outcome, version: version}
		w.mu.Unlock()
		if err != nil {
			pause(ctx, 50*time.Millisecond)
		}
		pause(ctx, thinkTime)
	}
}

// readAll scans every element of the set (across however many ranges hold
// it), retrying the whole scan until it succeeds or timeout passes.
func readAll(cl *client.Client, timeout time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		out := map[string]string{}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var err error
		for kv, e := range cl.Scan(ctx, []byte("set/"), []byte("set0"), nil) {
			if e != nil {
				err = e
				break
			}
			if !strings.HasSuffix(string(kv.Key), probeSuffix) {
				out[string(kv.Key)] = string(kv.Value)
			}
		}
		cancel()
		if err == nil {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("final read of the set: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
