package rangesm_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// The MVCC state and stats are in the applied state record; a range
// written with an old layout (an applied state without them, a version
// 0x01 MVCC state record and a stats record of its own) loads them from
// their own records, and its next write moves them into the applied
// state, deleting those.
func TestMVCCStateInTheAppliedState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	open := func(boot bool) (*store, func()) { return openStore(t, dir, boot, rangesm.Config{}) }
	s, stop := open(true)
	s.propose(user, put("a", "1", ts(1000, 0)))
	s.propose(user, put("b", "22", ts(1001, 0)))
	want := s.state(user)
	if want.Stats.LiveKeys != 2 {
		t.Fatalf("stats after two puts: %+v", want.Stats)
	}
	noOwnRecords := func(what string) {
		t.Helper()
		for _, k := range [][]byte{keys.MVCCStateKey(user), keys.MVCCStatsKey(user)} {
			if _, err := s.db.Get(k); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("%s: record %x: %v", what, k, err)
			}
		}
	}
	noOwnRecords("after two puts")
	s.s.Stop()
	v, err := s.db.Get(keys.AppliedStateKey(user))
	if err != nil {
		t.Fatal(err)
	}
	pos, m, hasMachine, err := logstore.DecodeAppliedState(v)
	if err != nil || !hasMachine || m[0] != 0x02 {
		t.Fatalf("applied state %x: %v", v, err)
	}
	// Rewrite it (the store is stopped) as the old layout: the applied
	// state alone, 0x01 through frontier gc_threshold, and 0x01 stats in
	// the stats record.
	_, n := binary.Uvarint(m[1:])
	cut := 1 + n + 24
	old := append([]byte{0x01}, m[1:cut]...)
	stats := append([]byte{0x01}, m[cut:]...)
	b := storage.NewBatch(0)
	b.Put(keys.AppliedStateKey(user), logstore.EncodeAppliedState(pos, nil))
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
	noOwnRecords("after a write over the old layout")
	stop()

	s, stop = open(false)
	defer stop()
	if got := s.state(user); got.Stats != want.Stats || got.Frontier != want.Frontier {
		t.Fatalf("after a restart: %+v, want %+v", got, want)
	}
}
