package node

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// TestReadDuringSplitMeetsTheIntent: a read of a key of a split's
// right-hand half, served by the left-hand range while that range applies
// the split, at a timestamp at or above the key's intent, must not answer
// as if there were no intent. The window is the one a later entry of the
// split's apply group opens: a client write from a client the dedup cache
// does not hold (a split empties it) writes the apply batch early to
// read the engine, with the split's move of the right-hand half's
// intents to the new range's lock table, while the range's descriptor in
// memory still covers the half. A read meanwhile looked for z's intent
// under the left-hand range's ID, found none, and answered without the
// write of a transaction committed below it. A split now ends its apply
// batch, its shorter descriptor published before that batch is written
// (raft/apply.go, applyCommittedLocked): the read is sent the new
// descriptor and goes to the right-hand range.
//
// The group: the split and two writes of new clients are put in the log
// with the range's apply held, the node restarts, and the restarted
// leader commits them with its first entry, in one apply message. When
// the second write loads its client's dedup state, the batch written
// holds the first write's dedup record: the split's batch is in the
// engine by then, and the read is sent there.
func TestReadDuringSplitMeetsTheIntent(t *testing.T) {
	var hold atomic.Uint64 // the range whose committed entries wait
	dir := filepath.Join(t.TempDir(), "node")
	tn := startNode(t, dir, Config{raftTesting: raft.TestingKnobs{HoldApply: func(_, rangeID uint64) bool {
		return rangeID == hold.Load()
	}}})
	ctx := ctxT(t)
	txn := kvpb.NewTxnClient(tn.cc)
	put(t, tn, "a", "0")
	l := tn.n.rangeIDForKey([]byte("a"))
	id := []byte("0123456789abcdef")
	var pa *kvpb.PutResponse
	w := stageAndCommitZ(t, ctx, txn, id, func() {
		// The range's frontier above the intent's p.
		var err error
		if pa, err = tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}); err != nil {
			t.Fatal(err)
		}
	})

	// The split, as Store.Split proposes it, and two writes of clients
	// with no dedup state.
	r, err := tn.n.store.Replica(l)
	if err != nil {
		t.Fatal(err)
	}
	desc := r.Descriptor()
	rightID, err := tn.n.store.AllocRangeID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leftDesc, rightDesc := apply.SplitDescriptors(desc, []byte("m"), rightID)
	split := &command.Command{Kind: command.KindSplit, ExpectedGeneration: desc.GetGeneration(), Descriptor: leftDesc, Right: rightDesc}
	const client1, client2 = 0x5b117001, 0x5b117002
	write := func(client uint64, k string) *command.Command {
		return &command.Command{Header: command.Header{ClientID: client, RequestSeq: 1}, Kind: command.KindPut,
			Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte(k), Value: []byte("w")}}}
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var proposers sync.WaitGroup
	propose := func(cmd *command.Command, after uint64) uint64 {
		proposers.Add(1)
		go func() {
			defer proposers.Done()
			_, _, _ = tn.n.store.Propose(pctx, l, cmd) // answered by the stop: the entry stays in the log
		}()
		return logEntryOf(t, tn, r, after, cmd.Kind)
	}
	hold.Store(l)
	splitAt := propose(split, r.Status().Applied)
	w1At := propose(write(client1, "b"), splitAt)
	w2At := propose(write(client2, "c"), w1At)
	tn.cc.Close()
	tn.stop(t)
	proposers.Wait()

	var mu sync.Mutex // the hooks run on the replicas' goroutines
	var groups [][2]uint64
	var got *kvpb.GetResponse
	var during error
	served := false
	var release atomic.Bool
	var again atomic.Pointer[testNode]
	w1Record := keys.DedupRecordKey(l, client1, 1)
	tn = startNode(t, dir, Config{raftTesting: raft.TestingKnobs{
		HoldApply: func(_, rangeID uint64) bool { return rangeID == l && !release.Load() },
		OnApply: func(_, rangeID uint64, ents []*pb.Entry) {
			if rangeID == l && len(ents) > 0 {
				mu.Lock()
				groups = append(groups, [2]uint64{ents[0].GetIndex(), ents[len(ents)-1].GetIndex()})
				mu.Unlock()
			}
		},
		OnEngineWrite: func(_ uint64, b *storage.Batch) {
			tn := again.Load()
			if tn == nil || !putsKey(b, w1Record) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if served {
				return
			}
			served = true
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			got, during = tn.kv.Get(rctx, &kvpb.GetRequest{Header: &kvpb.RequestHeader{RangeId: l, ReadTimestamp: pa.GetVersion()},
				Key: []byte("z")})
		},
	}})
	again.Store(tn)
	r, err = tn.n.store.Replica(l)
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the split and the writes committed again, held", func() bool {
		st := r.Status()
		return st.Held != 0 && st.Held <= splitAt && st.Commit >= w2At
	})
	release.Store(true)
	pollUntil(t, "the split and the writes applied", func() bool { return r.Status().Applied >= w2At })

	mu.Lock()
	defer mu.Unlock()
	grouped := false
	for _, g := range groups {
		grouped = grouped || (g[0] <= splitAt && g[1] >= w2At)
	}
	if !grouped {
		t.Fatalf("the split (%d) and the writes after it (%d, %d) did not apply in one group: %v", splitAt, w1At, w2At, groups)
	}
	if !served {
		t.Fatal("no read was sent while the writes after the split were written")
	}
	t.Logf("read of z at %v (intent at %v, committed) during the split: %v, %v", pa.GetVersion(), w.GetVersion(), got, during)
	if during == nil && string(got.GetValue()) != "1" {
		t.Fatalf("the read at %v answered %q (found %v) past z's intent at %v of a committed transaction",
			pa.GetVersion(), got.GetValue(), got.GetFound(), w.GetVersion())
	}
	if tn.n.rangeIDForKey([]byte("z")) != rightID {
		t.Fatalf("z is in range %d after the split, want %d", tn.n.rangeIDForKey([]byte("z")), rightID)
	}
}

// logEntryOf waits until range r's log holds an entry of kind after index
// after, and returns its index.
func logEntryOf(t *testing.T, tn *testNode, r *raft.Replica, after uint64, kind command.Kind) uint64 {
	t.Helper()
	var at uint64
	pollUntil(t, kind.String()+" in the log", func() bool {
		for i := after + 1; i <= r.Status().LastIndex; i++ {
			v, err := tn.n.db.Get(keys.LogKey(r.RangeID(), i))
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			e, err := logstore.DecodeEntry(i, v)
			if err != nil {
				t.Fatal(err)
			}
			if k, ok := command.PeekKind(e.GetData()); ok && e.GetType() == pb.EntryNormal && k == kind {
				at = i
				return true
			}
		}
		return false
	})
	return at
}

// putsKey reports whether b puts key k.
func putsKey(b *storage.Batch, k []byte) bool {
	for rd := b.Reader(); ; {
		kind, key, _, ok := rd.Next()
		if !ok {
			return false
		}
		if kind == storage.RecordPut && bytes.Equal(key, k) {
			return true
		}
	}
}

// pollUntil waits, for 20 s at most, until cond holds.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
