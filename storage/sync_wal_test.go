package storage

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestSyncWALMakesWritesDurable(t *testing.T) {
	db := openTestDB(t, nil)
	before, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	fill(t, db, 100)
	if err := db.SyncWAL(); err != nil {
		t.Fatal(err)
	}
	after, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.WALSyncs != before.WALSyncs+1 {
		t.Errorf("WALSyncs %d -> %d, want one more", before.WALSyncs, after.WALSyncs)
	}
	db = reopen(t, db, nil)
	if _, err := db.Get(key(99)); err != nil {
		t.Fatalf("a write before SyncWAL is gone after reopen: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.SyncWAL(); !errors.Is(err, ErrClosed) {
		t.Errorf("SyncWAL on a closed DB = %v, want ErrClosed", err)
	}
}

// TestSyncWALBesideWrites runs SyncWAL in a loop while two goroutines
// write, one with Sync and one without, through memtable switches (a small
// write buffer retires WALs), as the Raft log writer and the apply path
// do; every write is there after a reopen.
func TestSyncWALBesideWrites(t *testing.T) {
	db := openTestDB(t, &Options{WriteBufferSize: 64 << 10})
	const perWriter = 1000
	var writers sync.WaitGroup
	errs := make(chan error, 3)
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			wo := NoSync
			if w == 1 {
				wo = Sync
			}
			for i := range perWriter {
				if err := db.Put([]byte(fmt.Sprintf("w%d-%05d", w, i)), make([]byte, 100), wo); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	syncerDone := make(chan struct{})
	syncs := 0
	go func() {
		defer close(syncerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.SyncWAL(); err != nil {
				errs <- fmt.Errorf("SyncWAL: %w", err)
				return
			}
			syncs++
		}
	}()
	writers.Wait()
	close(stop)
	<-syncerDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if syncs == 0 {
		t.Fatal("SyncWAL never ran beside the writers")
	}
	db = reopen(t, db, nil)
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if n != 2*perWriter {
		t.Fatalf("%d keys after reopen, want %d", n, 2*perWriter)
	}
}
