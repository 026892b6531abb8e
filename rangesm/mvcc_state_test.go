package rangesm_test

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// The MVCC stats are in the MVCC state record; a range written with the
// old layout (a version 0x01 state record and a stats record of its own)
// loads its stats from the stats record, and its next write replaces both
// with one record.
func TestMVCCStatsInTheStateRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	open := func(boot bool) (*store, func()) {
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
		f, err := rangesm.NewFactory(rangesm.Config{Engine: db, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := raft.NewStore(raft.Config{Engine: db, StateMachines: f, NodeID: 1, ClusterID: "c",
			TickInterval: 10 * time.Millisecond, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		st := &store{t: t, db: db, s: rs}
		rs.SetAppliedWaiter(st)
		rs.Start()
		return st, func() { rs.Stop(); db.Close() }
	}
	s, stop := open(true)
	s.propose(user, put("a", "1", ts(1000, 0)))
	s.propose(user, put("b", "22", ts(1001, 0)))
	want := s.state(user)
	if want.Stats.LiveKeys != 2 {
		t.Fatalf("stats after two puts: %+v", want.Stats)
	}
	if _, err := s.db.Get(keys.MVCCStatsKey(user)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a stats record of its own was written: %v", err)
	}
	v, err := s.db.Get(keys.MVCCStateKey(user))
	if err != nil || v[0] != 0x02 {
		t.Fatalf("state record %x, %v", v, err)
	}
	// Rewrite it, with the store stopped, as the old layout: 0x01 through
	// frontier gc_threshold, and 0x01 stats in the stats record.
	s.s.Stop()
	_, n := binary.Uvarint(v[1:])
	cut := 1 + n + 24
	old := append([]byte{0x01}, v[1:cut]...)
	stats := append([]byte{0x01}, v[cut:]...)
	b := storage.NewBatch(0)
	b.Put(keys.MVCCStateKey(user), old)
	b.Put(keys.MVCCStatsKey(user), stats)
	if err := s.db.Write(b, storage.Sync); err != nil {
		t.Fatal(err)
	}
	s.db.Close()

	s, stop = open(false)
	if got := s.state(user); got.Stats != want.Stats || got.Frontier != want.Frontier {
		t.Fatalf("loaded from the old layout: %+v, want %+v", got, want)
	}
	s.propose(user, put("c", "333", ts(1002, 0)))
	want = s.state(user)
	if want.Stats.LiveKeys != 3 {
		t.Fatalf("stats after a third put: %+v", want.Stats)
	}
	if _, err := s.db.Get(keys.MVCCStatsKey(user)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the old stats record outlived the next write: %v", err)
	}
	stop()

	s, stop = open(false)
	defer stop()
	if got := s.state(user); got.Stats != want.Stats || got.Frontier != want.Frontier {
		t.Fatalf("after a restart: %+v, want %+v", got, want)
	}
}
