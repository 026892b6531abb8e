package txnkv

import (
	"context"
	"errors"
	"testing"
)

func TestQuota(t *testing.T) {
	var q Quota
	for range 5 {
		if !q.Take() {
			t.Fatal("the zero Quota refused")
		}
	}
	q.Set(2)
	if !q.Take() || !q.Take() || q.Take() || q.Take() {
		t.Fatal("a quota of 2 did not allow exactly 2")
	}
}

func TestOutcomeText(t *testing.T) {
	for _, o := range []Outcome{OK, Fail, Info} {
		b, _ := o.MarshalText()
		var got Outcome
		if err := got.UnmarshalText(b); err != nil || got != o {
			t.Fatalf("%v round-tripped to %v, %v", o, got, err)
		}
	}
	var o Outcome
	if err := o.UnmarshalText([]byte("maybe")); err == nil {
		t.Fatal("an unknown outcome parsed")
	}
}

// MemKV's transactions see their own writes, apply nothing when the
// function fails, and, when made ambiguous, sometimes applied and
// sometimes not.
func TestMemKV(t *testing.T) {
	ctx := context.Background()
	m := NewMemKV(NoBug, 0, 1)
	boom := errors.New("boom")
	err := m.Txn(ctx, func(ctx context.Context, tx Tx) error {
		if err := tx.Put(ctx, "k", []byte("1")); err != nil {
			return err
		}
		if v, ok, _ := tx.Get(ctx, "k"); !ok || string(v) != "1" {
			t.Errorf("own write not seen: %q %v", v, ok)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the function's error", err)
	}
	get := func(m *MemKV) (v string, found bool) {
		_ = m.Txn(ctx, func(ctx context.Context, tx Tx) error {
			b, ok, _ := tx.Get(ctx, "k")
			v, found = string(b), ok
			return nil
		})
		return v, found
	}
	if _, found := get(m); found {
		t.Fatal("an aborted transaction's write applied")
	}

	applied, lost := 0, 0
	for i := range uint64(40) {
		m := NewMemKV(NoBug, 1, i)
		err := m.Txn(ctx, func(ctx context.Context, tx Tx) error { return tx.Put(ctx, "k", []byte("v")) })
		if !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("got %v, want ErrAmbiguous", err)
		}
		m.ambiguous = 0
		if _, found := get(m); found {
			applied++
		} else {
			lost++
		}
	}
	if applied == 0 || lost == 0 {
		t.Fatalf("ambiguous commits: %d applied, %d not; want some of each", applied, lost)
	}
}
