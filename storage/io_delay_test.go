package storage

import (
	"errors"
	"testing"
	"time"
)

func TestSetIODelayNeedsFaultInjection(t *testing.T) {
	db := openTestDB(t, nil)
	if err := db.SetIODelay(IOSync, time.Millisecond, 0); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("SetIODelay on a database opened without FaultInjection = %v, want ErrNotSupported", err)
	}
}

// TestSetIODelaySlowsSyncs: a sync delay holds up both kinds of WAL sync
// the Raft log writer can wait on (a Sync write and SyncWAL) by at least
// the delay, and stops once cleared; bad arguments change nothing.
func TestSetIODelaySlowsSyncs(t *testing.T) {
	db := openTestDB(t, &Options{FaultInjection: true})
	const delay = 40 * time.Millisecond
	if err := db.SetIODelay(IOSync, delay, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := db.Put([]byte("k"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("a Sync write took %v under a %v sync delay", took, delay)
	}
	mustPut(t, db, "k2", "v2")
	start = time.Now()
	if err := db.SyncWAL(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("SyncWAL took %v under a %v sync delay", took, delay)
	}

	for _, bad := range []struct {
		ops           IOOps
		delay, jitter time.Duration
	}{
		{IOSync, -time.Millisecond, 0},
		{IOSync, 0, -time.Millisecond},
		{IOSync, MaxIODelay, time.Millisecond},
		{IOSync, MaxIODelay + time.Millisecond, 0},
		{1 << 9, time.Millisecond, 0},
	} {
		if err := db.SetIODelay(bad.ops, bad.delay, bad.jitter); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SetIODelay(%v, %v, %v) = %v, want ErrInvalidArgument", bad.ops, bad.delay, bad.jitter, err)
		}
	}
	if err := db.SetIODelay(IOAll, 0, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("k2")); err != nil || string(v) != "v2" {
		t.Fatalf("Get(k2) = %q, %v", v, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.SetIODelay(IOSync, delay, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("SetIODelay after Close = %v, want ErrClosed", err)
	}
}

func TestIOOpsNames(t *testing.T) {
	for _, name := range []string{"append", "sync", "create", "read", "rename"} {
		op, err := ParseIOOp(name)
		if err != nil || op.String() != name {
			t.Errorf("ParseIOOp(%q) = %v, %v", name, op, err)
		}
	}
	if _, err := ParseIOOp("fsync"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("ParseIOOp(fsync) = %v, want ErrInvalidArgument", err)
	}
	if got := (IOSync | IORead).String(); got != "sync|read" {
		t.Errorf("(IOSync|IORead).String() = %q", got)
	}
	if got := IOOps(1 << 9).String(); got != "0x200" {
		t.Errorf("IOOps(1<<9).String() = %q", got)
	}
}
