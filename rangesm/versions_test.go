package rangesm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// These tests run the range state machine under real replication: a
// one-node store over the real engine, commands proposed through Raft and
// applied by rangesm, reads through rangesm.Reader.

type store struct {
	t  *testing.T
	db *storage.DB
	s  *raft.Store
}

func newStore(t *testing.T) *store { return newStoreObserving(t, nil) }

func newStoreObserving(t *testing.T, observe func(hlc.Timestamp)) *store {
	t.Helper()
	return newStoreConfig(t, rangesm.Config{Observe: observe})
}

// newStoreConfig is newStore with cfg's Observe and Feed.
func newStoreConfig(t *testing.T, cfg rangesm.Config) *store {
	t.Helper()
	st, stop := openStore(t, filepath.Join(t.TempDir(), "db"), true, cfg)
	t.Cleanup(stop)
	return st
}

// openStore opens the engine in dir (bootstrapping a one-node cluster in
// it if boot) and starts a Store on it with cfg's Observe and Feed; stop
// stops the Store and closes the engine, so that a test can open the same
// directory again, as after a restart.
func openStore(t *testing.T, dir string, boot bool, cfg rangesm.Config) (st *store, stop func()) {
	t.Helper()
	db, err := storage.Open(dir, keys.WithUserVersions(nil))
	if err != nil {
		t.Fatal(err)
	}
	if boot {
		if err := raft.Bootstrap(db, "c", 1, []*kvpb.NodeDescriptor{{NodeId: 1, Address: "127.0.0.1:1"}}); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := rangesm.NewFactory(rangesm.Config{Engine: db, Logger: log, Observe: cfg.Observe, Feed: cfg.Feed})
	if err != nil {
		t.Fatal(err)
	}
	s, err := raft.NewStore(raft.Config{Engine: db, StateMachines: f, NodeID: 1, ClusterID: "c",
		TickInterval: 10 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	st = &store{t: t, db: db, s: s}
	s.SetAppliedWaiter(st)
	s.Start()
	return st, func() {
		s.Stop()
		db.Close()
	}
}

// split splits range rangeID at key, retrying until ctx ends (the
// range's leader may not be elected yet), and returns the two halves.
func (s *store) split(ctx context.Context, rangeID uint64, key string) (left, right *kvpb.RangeDescriptor) {
	s.t.Helper()
	for {
		left, right, err := s.s.Split(ctx, rangeID, []byte(key))
		if err == nil {
			return left, right
		}
		if ctx.Err() != nil {
			s.t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WaitApplied implements raft.AppliedWaiter for the one node: merges read
// its replica.
func (s *store) WaitApplied(ctx context.Context, desc *kvpb.RangeDescriptor, index uint64) error {
	for {
		if r, err := s.s.Replica(desc.GetRangeId()); err == nil && r.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// propose proposes cmd to rangeID until the replica is leader, and fails
// the test on any other error.
func (s *store) propose(rangeID uint64, cmd *command.Command) command.Result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		c := *cmd
		res, _, err := s.s.Propose(ctx, rangeID, &c)
		if err == nil {
			return res
		}
		if (errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrUnavailable)) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		s.t.Fatalf("propose %v: %v", cmd.Kind, err)
	}
}

func (s *store) state(rangeID uint64) rangesm.MVCCState {
	s.t.Helper()
	r, err := s.s.Replica(rangeID)
	if err != nil {
		s.t.Fatal(err)
	}
	return r.StateMachine().(*rangesm.Range).MVCCState()
}

func ts(wall int64, logical int32) hlc.Timestamp {
	return hlc.Timestamp{WallTime: wall, Logical: logical}
}

func put(k, v string, t hlc.Timestamp) *command.Command {
	return &command.Command{Header: command.Header{Timestamp: t}, Kind: command.KindPut,
		Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte(k), Value: []byte(v)}}}
}

const user = keys.FirstUserRangeID

// TestWritesApplyAtTheFrontierRule: a write applies at max(T, F.Next()),
// every mutation of it at that version, and the frontier follows; a close
// raises the frontier and later writes land above it.
func TestWritesApplyAtTheFrontierRule(t *testing.T) {
	s := newStore(t)
	if res := s.propose(user, put("a", "1", ts(1000, 0))); res.Err() != nil || res.Version != ts(1000, 0) {
		t.Fatalf("put at 1000: %+v", res)
	}
	// A proposal timestamp below the frontier: just above it.
	if res := s.propose(user, put("b", "1", ts(500, 0))); res.Version != ts(1000, 1) {
		t.Fatalf("put at 500 after 1000: version %s, want 1000,1", res.Version)
	}
	batch := &command.Command{Header: command.Header{Timestamp: ts(2000, 0)}, Kind: command.KindBatch, Mutations: []command.Mutation{
		{Kind: command.KindPut, Key: []byte("c"), Value: []byte("1")},
		{Kind: command.KindDelete, Key: []byte("a")},
		{Kind: command.KindPut, Key: []byte("c"), Value: []byte("2")},
	}}
	if res := s.propose(user, batch); res.Version != ts(2000, 0) {
		t.Fatalf("batch: version %s", res.Version)
	}
	if f := s.state(user).Frontier; f != ts(2000, 0) {
		t.Fatalf("frontier %s, want 2000,0", f)
	}
	rd := rangesm.NewReader(s.db)
	for _, tc := range []struct {
		key   string
		at    hlc.Timestamp
		found bool
		value string
		ver   hlc.Timestamp
	}{
		{"a", ts(999, 0), false, "", hlc.Timestamp{}},
		{"a", ts(1000, 0), true, "1", ts(1000, 0)},
		{"a", ts(2000, 0), false, "", hlc.Timestamp{}},
		{"b", ts(1000, 0), false, "", hlc.Timestamp{}},
		{"b", ts(1000, 1), true, "1", ts(1000, 1)},
		{"c", ts(2000, 0), true, "2", ts(2000, 0)},
	} {
		kv, found, err := rd.Get([]byte(tc.key), tc.at)
		if err != nil || found != tc.found || string(kv.Value) != tc.value || kv.Version != tc.ver {
			t.Errorf("Get(%s at %s) = %q %v %s, %v; want %q %v %s", tc.key, tc.at, kv.Value, found, kv.Version, err, tc.value, tc.found, tc.ver)
		}
	}
	// Close above the frontier; a close below it changes nothing.
	s.propose(user, &command.Command{Kind: command.KindClose, Close: ts(5000, 0)})
	s.propose(user, &command.Command{Kind: command.KindClose, Close: ts(3000, 0)})
	if f := s.state(user).Frontier; f != ts(5000, 0) {
		t.Fatalf("frontier after closes %s, want 5000,0", f)
	}
	if res := s.propose(user, put("d", "1", ts(4000, 0))); res.Version != ts(5000, 1) {
		t.Fatalf("put at 4000 after close at 5000: version %s, want 5000,1", res.Version)
	}
}

// TestCompareAndSwapOnVersion: a CAS reports the key's current version and
// creation, swaps on a matching version only, and by value as before.
func TestCompareAndSwapOnVersion(t *testing.T) {
	s := newStore(t)
	created := s.propose(user, put("k", "v1", ts(100, 0))).Version
	v2 := s.propose(user, put("k", "v2", ts(200, 0))).Version
	cas := func(c command.CAS, at hlc.Timestamp) command.Result {
		c.Key = []byte("k")
		return s.propose(user, &command.Command{Header: command.Header{Timestamp: at}, Kind: command.KindCAS, CAS: c})
	}
	res := cas(command.CAS{ExpectVersion: true, ExpectedVersion: created, NewValue: []byte("x")}, ts(300, 0))
	if res.Succeeded || !res.Found || string(res.Value) != "v2" || res.CurrentVersion != v2 || res.CurrentCreated != created || !res.Version.IsZero() {
		t.Fatalf("CAS on a stale version: %+v", res)
	}
	if f := s.state(user).Frontier; f != v2 {
		t.Fatalf("a failed CAS moved the frontier to %s", f)
	}
	res = cas(command.CAS{ExpectVersion: true, ExpectedVersion: v2, NewValue: []byte("v3")}, ts(300, 0))
	if !res.Succeeded || res.Version != ts(300, 0) || res.CurrentVersion != v2 {
		t.Fatalf("CAS on the current version: %+v", res)
	}
	// By value; a version CAS on an absent key fails.
	if res := cas(command.CAS{Expected: []byte("v3"), Delete: true}, ts(400, 0)); !res.Succeeded || res.Version != ts(400, 0) {
		t.Fatalf("CAS delete by value: %+v", res)
	}
	if res := cas(command.CAS{ExpectVersion: true, ExpectedVersion: ts(400, 0), NewValue: []byte("y")}, ts(500, 0)); res.Succeeded || res.Found {
		t.Fatalf("CAS on the version of a deletion: %+v", res)
	}
	// Recreated: a new creation version.
	if res := cas(command.CAS{ExpectAbsent: true, NewValue: []byte("n")}, ts(600, 0)); !res.Succeeded {
		t.Fatalf("CAS expect-absent: %+v", res)
	}
	kv, found, err := rangesm.NewReader(s.db).Get([]byte("k"), ts(600, 0))
	if err != nil || !found || kv.Created != ts(600, 0) || string(kv.Value) != "n" {
		t.Fatalf("after recreation: %+v %v %v", kv, found, err)
	}
}

// history is the model of a range's versions: per key, its versions in
// order, a nil value for a deletion.
type history map[string][]struct {
	v     hlc.Timestamp
	value []byte
}

func (h history) at(k string, t hlc.Timestamp) (value []byte, ver hlc.Timestamp, ok bool) {
	for _, e := range h[k] {
		if e.v.LessEq(t) {
			value, ver = e.value, e.v
		}
	}
	return value, ver, value != nil
}

// TestReadsAtATimestampMatchTheHistory writes random commands with random
// proposal timestamps and checks every read (Get, MultiGet, forward and
// reverse Scan with limits) at random timestamps at or below the frontier
// against the model, before and after later writes: reads at a timestamp
// never change.
func TestReadsAtATimestampMatchTheHistory(t *testing.T) {
	s := newStore(t)
	rng := rand.New(rand.NewPCG(3, 4))
	h := history{}
	key := func() string { return fmt.Sprintf("k%02d", rng.IntN(20)) }
	var frontiers []hlc.Timestamp
	rd := rangesm.NewReader(s.db)
	check := func(at hlc.Timestamp) {
		t.Helper()
		var want []string
		for k := range h {
			if v, _, ok := h.at(k, at); ok {
				want = append(want, k+"="+string(v))
			}
		}
		slices.Sort(want)
		for _, reverse := range []bool{false, true} {
			for _, limit := range []int{1, 3, 100} {
				var got []string
				o := rangesm.ScanOptions{Timestamp: at, Reverse: reverse, Limit: limit, MaxBytes: 1 << 20}
				for {
					page, err := rd.Scan(o)
					if err != nil {
						t.Fatal(err)
					}
					for _, kv := range page.Kvs {
						_, ver, _ := h.at(string(kv.Key), at)
						if kv.GetVersion().GetWallNanos() != ver.WallTime || int32(kv.GetVersion().GetLogical()) != ver.Logical {
							t.Fatalf("scan at %s: %s has version %v, want %s", at, kv.Key, kv.GetVersion(), ver)
						}
						got = append(got, string(kv.Key)+"="+string(kv.Value))
					}
					if !page.More {
						break
					}
					if reverse {
						o.End = page.ResumeKey
					} else {
						o.Start = page.ResumeKey
					}
				}
				if reverse {
					slices.Reverse(got)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("scan at %s (reverse %v, limit %d):\n got %v\nwant %v", at, reverse, limit, got, want)
				}
			}
		}
		ks := [][]byte{[]byte("k03"), []byte("k00"), []byte("zz"), []byte("k03"), []byte("k19")}
		kvs, found, err := rd.MultiGet(ks, at)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range ks {
			v, ver, ok := h.at(string(k), at)
			if found[i] != ok || !bytes.Equal(kvs[i].Value, v) || (ok && kvs[i].Version != ver) {
				t.Fatalf("MultiGet at %s: %s = %q %v %s, want %q %v %s", at, k, kvs[i].Value, found[i], kvs[i].Version, v, ok, ver)
			}
		}
	}
	wall := int64(1000)
	for i := 0; i < 300; i++ {
		wall += int64(rng.IntN(5)) - 1 // sometimes below the frontier
		cmd := &command.Command{Header: command.Header{Timestamp: ts(wall, 0)}}
		var muts []command.Mutation
		switch rng.IntN(4) {
		case 0:
			a, b := key(), key()
			if a > b {
				a, b = b, a
			}
			muts = []command.Mutation{{Kind: command.KindDeleteRange, Key: []byte(a), Value: []byte(b)}}
		case 1:
			muts = []command.Mutation{{Kind: command.KindDelete, Key: []byte(key())}}
		default:
			muts = []command.Mutation{{Kind: command.KindPut, Key: []byte(key()), Value: []byte(fmt.Sprint(i))}}
		}
		cmd.Kind = muts[0].Kind
		cmd.Mutations = muts
		res := s.propose(user, cmd)
		if res.Err() != nil {
			t.Fatal(res.Err())
		}
		v := res.Version
		if len(frontiers) > 0 && !frontiers[len(frontiers)-1].Less(v) {
			t.Fatalf("version %s not above the previous %s", v, frontiers[len(frontiers)-1])
		}
		add := func(k string, value []byte) {
			if _, _, live := h.at(k, hlc.MaxTimestamp); !live && value == nil {
				return // deleting an absent key writes nothing
			}
			h[k] = append(h[k], struct {
				v     hlc.Timestamp
				value []byte
			}{v, value})
		}
		m := muts[0]
		switch m.Kind {
		case command.KindPut:
			add(string(m.Key), m.Value)
		case command.KindDelete:
			add(string(m.Key), nil)
		case command.KindDeleteRange:
			for k := range h {
				if k >= string(m.Key) && k < string(m.Value) {
					add(k, nil)
				}
			}
		}
		frontiers = append(frontiers, v)
		if i%50 == 49 {
			for j := 0; j < 5; j++ {
				check(frontiers[rng.IntN(len(frontiers))])
			}
			check(s.state(user).Frontier)
		}
	}
	// Every earlier point, once more, after all the writes.
	for j := 0; j < 20; j++ {
		check(frontiers[rng.IntN(len(frontiers))])
	}
}

// TestSplitAndMergeCarryTheFrontier: both halves of a split start at the
// range's frontier (a write on either lands above every version read
// before), and a merge keeps the higher one.
func TestSplitAndMergeCarryTheFrontier(t *testing.T) {
	s := newStore(t)
	s.propose(user, put("a", "1", ts(1000, 0)))
	s.propose(user, put("m", "1", ts(2000, 0)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left, right := s.split(ctx, user, "g")
	for _, id := range []uint64{left.GetRangeId(), right.GetRangeId()} {
		if f := s.state(id).Frontier; f != ts(2000, 0) {
			t.Fatalf("range %d after the split: frontier %s, want 2000,0", id, f)
		}
	}
	if v := s.propose(right.GetRangeId(), put("z", "1", ts(10, 0))).Version; v != ts(2000, 1) {
		t.Fatalf("write on the right-hand range at %s, want 2000,1", v)
	}
	s.propose(left.GetRangeId(), &command.Command{Kind: command.KindClose, Close: ts(9000, 0)})
	if _, err := s.s.Merge(ctx, left.GetRangeId()); err != nil {
		t.Fatal(err)
	}
	if f := s.state(left.GetRangeId()).Frontier; f != ts(9000, 0) {
		t.Fatalf("after the merge: frontier %s, want 9000,0", f)
	}
	if kv, found, err := rangesm.NewReader(s.db).Get([]byte("z"), ts(9000, 0)); err != nil || !found || kv.Version != ts(2000, 1) {
		t.Fatalf("the right-hand range's key after the merge: %+v %v %v", kv, found, err)
	}
}

// TestNewFrontiersAreObserved: the node hears of the frontiers its
// replicas publish (its clock follows the versions it applies), in
// increasing order.
func TestNewFrontiersAreObserved(t *testing.T) {
	var mu sync.Mutex
	var seen []hlc.Timestamp
	s := newStoreObserving(t, func(f hlc.Timestamp) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, f)
	})
	v := s.propose(user, put("k", "v", ts(7000, 0))).Version
	s.propose(user, &command.Command{Kind: command.KindClose, Close: ts(9000, 3)})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(seen, v) || !slices.Contains(seen, ts(9000, 3)) {
		t.Fatalf("observed frontiers %v, want %s and 9000,3 among them", seen, v)
	}
	for i := 1; i < len(seen); i++ {
		if !seen[i-1].Less(seen[i]) {
			t.Fatalf("observed frontiers %v do not increase", seen)
		}
	}
}
