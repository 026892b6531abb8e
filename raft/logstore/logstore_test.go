package logstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

func openDB(t *testing.T, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return db
}

func ent(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

func ents(lo, hi, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := lo; i < hi; i++ {
		out = append(out, ent(i, term, fmt.Sprintf("e%d-t%d", i, term)))
	}
	return out
}

// write stages an append through a batch and commits it, as a round does.
func write(t *testing.T, db *storage.DB, s *Store, es []*pb.Entry, hs *pb.HardState) {
	t.Helper()
	b := storage.NewBatch(0)
	a := s.StageAppend(b, es, hs)
	if err := db.Write(b, storage.Sync); err != nil {
		t.Fatal(err)
	}
	s.CommitAppend(a)
}

func checkEntries(t *testing.T, s *Store, lo, hi uint64, wantTerm func(i uint64) uint64) {
	t.Helper()
	got, err := s.Entries(lo, hi, ^uint64(0))
	if err != nil {
		t.Fatalf("Entries(%d, %d): %v", lo, hi, err)
	}
	if uint64(len(got)) != hi-lo {
		t.Fatalf("Entries(%d, %d) returned %d entries", lo, hi, len(got))
	}
	for i, e := range got {
		idx := lo + uint64(i)
		want := fmt.Sprintf("e%d-t%d", idx, wantTerm(idx))
		if e.GetIndex() != idx || e.GetTerm() != wantTerm(idx) || string(e.GetData()) != want {
			t.Fatalf("entry %d = %d/%d %q, want term %d %q", idx, e.GetIndex(), e.GetTerm(), e.GetData(), wantTerm(idx), want)
		}
		term, err := s.Term(idx)
		if err != nil || term != wantTerm(idx) {
			t.Fatalf("Term(%d) = %d, %v", idx, term, err)
		}
	}
}

// TestAppendOverwriteTruncateReload drives a Store through the life of a
// log against the real engine, with a cache small enough that reads come
// from both the cache and the engine, and checks that a reload finds the
// same state.
func TestAppendOverwriteTruncateReload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := openDB(t, dir)
	const rangeID = 7
	s, err := Load(db, rangeID, 200)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := s.FirstIndex(); fi != 1 {
		t.Fatalf("empty log FirstIndex = %d", fi)
	}
	if li, _ := s.LastIndex(); li != 0 {
		t.Fatalf("empty log LastIndex = %d", li)
	}
	hs := &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(2)), Commit: new(uint64(0))}
	write(t, db, s, ents(1, 51, 1), hs)
	checkEntries(t, s, 1, 51, func(uint64) uint64 { return 1 })

	// A new leader overwrites a suffix with a shorter one.
	write(t, db, s, ents(40, 45, 2), &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(3)), Commit: new(uint64(30))})
	if li, _ := s.LastIndex(); li != 44 {
		t.Fatalf("LastIndex after overwrite = %d, want 44", li)
	}
	termOf := func(i uint64) uint64 {
		if i >= 40 {
			return 2
		}
		return 1
	}
	checkEntries(t, s, 1, 45, termOf)
	if _, err := s.Term(45); !errors.Is(err, etcdraft.ErrUnavailable) {
		t.Fatalf("Term past the end: %v", err)
	}
	// maxSize: at least one entry, then as many as fit.
	if got, _ := s.Entries(1, 45, 1); len(got) != 1 {
		t.Fatalf("Entries with maxSize 1 returned %d", len(got))
	}
	if got, _ := s.Entries(1, 45, uint64(3*EntrySize(ent(1, 1, "e1-t1")))); len(got) != 3 {
		t.Fatalf("Entries with room for 3 returned %d", len(got))
	}

	// Truncate up to 20 (applied).
	s.SetApplied(LogPosition{Index: 30, Term: 1}, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	b := storage.NewBatch(0)
	tr, ok, err := s.StageTruncate(b, 20)
	if err != nil || !ok {
		t.Fatalf("StageTruncate: %v %v", ok, err)
	}
	if err := db.Write(b, storage.NoSync); err != nil {
		t.Fatal(err)
	}
	s.CommitTruncate(tr)
	if _, ok, _ := s.StageTruncate(storage.NewBatch(0), 20); ok {
		t.Fatal("truncating to the truncated index again staged something")
	}
	if _, _, err := s.StageTruncate(storage.NewBatch(0), 31); err == nil {
		t.Fatal("truncating past the applied index was allowed")
	}
	if _, err := s.Entries(20, 25, ^uint64(0)); !errors.Is(err, etcdraft.ErrCompacted) {
		t.Fatalf("Entries below the first index: %v", err)
	}
	if term, err := s.Term(20); err != nil || term != 1 {
		t.Fatalf("Term(truncated index) = %d, %v", term, err)
	}
	if _, err := s.Term(19); !errors.Is(err, etcdraft.ErrCompacted) {
		t.Fatalf("Term below the truncated index: %v", err)
	}
	checkEntries(t, s, 21, 45, termOf)

	// Applied state is replicated state: stage it as apply does.
	b = storage.NewBatch(0)
	if err := StageAppliedState(b, rangeID, LogPosition{Index: 30, Term: 1}, []byte("machine"), &pb.ConfState{Voters: []uint64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(b, storage.NoSync); err != nil {
		t.Fatal(err)
	}

	// Reload from the engine: same log, HardState and applied state.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	s2, err := Load(db, rangeID, 200)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := s2.FirstIndex(); fi != 21 {
		t.Fatalf("reloaded FirstIndex = %d", fi)
	}
	if li, _ := s2.LastIndex(); li != 44 {
		t.Fatalf("reloaded LastIndex = %d", li)
	}
	hs2, cs, _ := s2.InitialState()
	if hs2.GetTerm() != 2 || hs2.GetVote() != 3 || hs2.GetCommit() != 30 {
		t.Fatalf("reloaded HardState = %v", hs2)
	}
	if len(cs.GetVoters()) != 3 {
		t.Fatalf("reloaded ConfState = %v", cs)
	}
	snap, err := s2.Snapshot()
	if err != nil || snap.GetMetadata().GetIndex() != 30 || snap.GetMetadata().GetTerm() != 1 {
		t.Fatalf("Snapshot() = %v, %v", snap, err)
	}
	checkEntries(t, s2, 21, 45, termOf)

	// Snapshot application wipes the log.
	b = storage.NewBatch(0)
	sa := s2.StageSnapshot(b, &pb.SnapshotMetadata{Index: new(uint64(100)), Term: new(uint64(4)), ConfState: &pb.ConfState{Voters: []uint64{1}}},
		&pb.HardState{Term: new(uint64(4)), Commit: new(uint64(100))})
	if err := db.Write(b, storage.Sync); err != nil {
		t.Fatal(err)
	}
	s2.CommitSnapshot(sa)
	if fi, _ := s2.FirstIndex(); fi != 101 {
		t.Fatalf("FirstIndex after snapshot = %d", fi)
	}
	if li, _ := s2.LastIndex(); li != 100 {
		t.Fatalf("LastIndex after snapshot = %d", li)
	}
	if term, _ := s2.Term(100); term != 4 {
		t.Fatalf("Term(snapshot index) = %d", term)
	}
	it, err := db.NewIter(&storage.IterOptions{LowerBound: keys.LogSpanAll(rangeID).Start, UpperBound: keys.LogSpanAll(rangeID).End})
	if err != nil {
		t.Fatal(err)
	}
	if it.First() {
		t.Fatalf("log entry %x left after the snapshot", it.Key())
	}
	it.Close()
	write(t, db, s2, ents(101, 104, 4), nil)
	checkEntries(t, s2, 101, 104, func(uint64) uint64 { return 4 })
}

// TestCorruptStateIsReported: a damaged record is an error naming the
// range, never a panic or a silently empty state.
func TestCorruptStateIsReported(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "db"))
	defer db.Close()
	if err := db.Put(keys.HardStateKey(3), []byte{0x01, 2, 3}, storage.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(db, 3, 0); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("Load with a corrupt HardState: %v", err)
	}
	if err := db.Put(keys.LogKey(4, 5), []byte{0x09}, storage.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(db, 4, 0); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("Load with a corrupt entry: %v", err)
	}
	if _, err := DecodeDescriptor([]byte{0xff, 0xff}); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("DecodeDescriptor(garbage): %v", err)
	}
}

func TestEntryCache(t *testing.T) {
	var c entryCache
	c.budget = 80 // five entries of 15-16 bytes
	c.appendEntries(ents(1, 11, 1))
	if c.first() != 6 || c.get(5) != nil || c.get(10) == nil {
		t.Fatalf("cache holds [%d, ...), want [6, 11)", c.first())
	}
	c.appendEntries(ents(8, 10, 2)) // overwrite the tail
	if e := c.get(9); e == nil || e.GetTerm() != 2 || c.get(10) != nil {
		t.Fatal("overwrite did not replace the tail")
	}
	c.appendEntries(ents(20, 21, 3)) // a gap restarts the cache
	if c.first() != 20 || c.get(9) != nil {
		t.Fatal("a gap did not restart the cache")
	}
	c.truncateFront(20)
	if c.get(20) != nil || len(c.ents) != 0 || c.bytes != 0 {
		t.Fatalf("truncateFront left %d entries, %d bytes", len(c.ents), c.bytes)
	}
}

func TestDescriptorRoundTrip(t *testing.T) {
	d := &kvpb.RangeDescriptor{RangeId: 9, StartKey: []byte("a"), Generation: 3,
		Replicas: []*kvpb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 4}}, NextReplicaId: 5}
	v, err := EncodeDescriptor(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDescriptor(v)
	if err != nil || got.GetRangeId() != 9 || got.GetNextReplicaId() != 5 || len(got.GetReplicas()) != 1 {
		t.Fatalf("round trip: %v %v", got, err)
	}
}

// TestCacheBudgetBoundsEveryCacheTogether: three logs whose own caches
// could each hold far more share a node-wide budget; their caches hold
// about the budget together (within one entry each), the busiest log
// keeps the most, every entry stays readable (from the engine past the
// cache), and releasing a cache gives its bytes back.
func TestCacheBudgetBoundsEveryCacheTogether(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "db"))
	one := EntrySize(ent(100, 1, "e100-t1"))
	budget := NewCacheBudget(int64(20 * one))
	var logs []*Store
	for id := uint64(1); id <= 3; id++ {
		s, err := Load(db, id, 1<<20) // each alone would keep everything
		if err != nil {
			t.Fatal(err)
		}
		s.ShareCache(budget)
		logs = append(logs, s)
	}
	hs := &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(0))}
	for round := uint64(0); round < 10; round++ {
		for i, s := range logs {
			n := uint64(3 * (i + 1)) // log 3 appends three times as much as log 1
			lo := 100 + round*n
			write(t, db, s, ents(lo, lo+n, 1), hs)
			if used, limit := budget.Used(), budget.Limit(); used > limit+int64(len(logs)*(one+1)) {
				t.Fatalf("round %d: the caches hold %d bytes together, over the budget of %d by more than an entry each", round, used, limit)
			}
		}
	}
	sum := 0
	for _, s := range logs {
		sum += s.cache.bytes
	}
	if int64(sum) != budget.Used() {
		t.Fatalf("the caches hold %d bytes, the budget counts %d", sum, budget.Used())
	}
	if logs[2].cache.bytes <= logs[0].cache.bytes {
		t.Errorf("the busiest log caches %d bytes, the idlest %d: want the busiest to keep more", logs[2].cache.bytes, logs[0].cache.bytes)
	}
	for i, s := range logs {
		n := uint64(3 * (i + 1))
		checkEntries(t, s, 100, 100+10*n, func(uint64) uint64 { return 1 })
	}
	before := budget.Used()
	released := logs[1].cache.bytes
	logs[1].ReleaseCache()
	if got := budget.Used(); got != before-int64(released) {
		t.Fatalf("after ReleaseCache the budget counts %d, want %d", got, before-int64(released))
	}
}

// A HardState that moves only the commit index is not written: Raft's
// commit index is volatile, and Load takes it up to the applied index.
// A change of term or vote is written.
func TestCommitOnlyHardStateNotWritten(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	const rangeID = 7
	s, err := Load(db, rangeID, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, s, ents(1, 11, 1), &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(2)), Commit: new(uint64(0))})
	b := storage.NewBatch(0)
	a := s.StageAppend(b, ents(11, 21, 1), &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(2)), Commit: new(uint64(10))})
	if got := b.Count(); got != 10 {
		t.Fatalf("an append moving only the commit index staged %d records, want its 10 entries", got)
	}
	if err := db.Write(b, storage.Sync); err != nil {
		t.Fatal(err)
	}
	s.CommitAppend(a)
	if s.HardState().GetCommit() != 10 {
		t.Fatalf("in-memory HardState = %v, want commit 10", s.HardState())
	}
	b = storage.NewBatch(0)
	s.StageAppend(b, nil, &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(2)), Commit: new(uint64(20))})
	if !b.Empty() {
		t.Fatalf("a commit-only HardState staged %d records", b.Count())
	}
	// The applied state, written by apply, is what the commit index is
	// raised to on a restart.
	b = storage.NewBatch(0)
	if err := StageAppliedState(b, rangeID, LogPosition{Index: 15, Term: 1}, nil, &pb.ConfState{Voters: []uint64{2}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(b, storage.Sync); err != nil {
		t.Fatal(err)
	}
	s2, err := Load(db, rangeID, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if hs, _, _ := s2.InitialState(); hs.GetTerm() != 1 || hs.GetVote() != 2 || hs.GetCommit() != 15 {
		t.Fatalf("reloaded HardState = %v, want term 1, vote 2, commit 15 (the applied index)", hs)
	}
	// A new term is written.
	b = storage.NewBatch(0)
	s2.StageAppend(b, nil, &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(0)), Commit: new(uint64(20))})
	if b.Count() != 1 {
		t.Fatalf("a new term staged %d records, want 1", b.Count())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAppliedStateEncoding(t *testing.T) {
	p := LogPosition{Index: 1 << 40, Term: 7}
	for _, machine := range [][]byte{nil, {}, []byte("the range's state")} {
		got, m, has, err := DecodeAppliedState(EncodeAppliedState(p, machine))
		if err != nil || got != p || has != (machine != nil) || string(m) != string(machine) {
			t.Fatalf("machine %q: decoded %v %q %v %v", machine, got, m, has, err)
		}
	}
	if _, _, _, err := DecodeAppliedState([]byte{0x02, 0x80}); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("a truncated applied state: %v", err)
	}
}
