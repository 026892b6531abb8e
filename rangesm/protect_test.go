package rangesm_test

import (
	"testing"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

func protectCmd(k command.Kind, p command.Protect, t hlc.Timestamp) *command.Command {
	return &command.Command{Header: command.Header{Timestamp: t}, Kind: k, Protect: p}
}

// TestProtectLifecycle: Protect allocates IDs and stores the record; a
// timestamp older than the proposal's minus half the window is refused
// with nothing written; a refresh extends the expiry (never shortens it)
// and is refused once the record expired as of its proposal; a
// conditional release leaves a record refreshed past its bound; a
// release removes it; protect commands on a user range are refused.
func TestProtectLifecycle(t *testing.T) {
	s := newStore(t)
	meta := keys.MetaRangeID
	const window = 1000
	p := command.Protect{Timestamp: ts(600, 0), Start: []byte("a"), End: []byte("m"), Expiry: 5000, Window: window, Description: "backup b1"}
	r1 := s.propose(meta, protectCmd(command.KindProtect, p, ts(1000, 0)))
	p2 := p
	p2.Start, p2.End, p2.Timestamp = nil, nil, ts(1000, 3)
	r2 := s.propose(meta, protectCmd(command.KindProtect, p2, ts(1001, 0)))
	if r1.Err() != nil || r2.Err() != nil || r1.NodeID == 0 || r2.NodeID != r1.NodeID+1 {
		t.Fatalf("protects: %+v %+v", r1, r2)
	}
	// 499 < 1000 - 1000/2: too old, nothing written.
	old := p
	old.Timestamp = ts(499, 9)
	if res := s.propose(meta, protectCmd(command.KindProtect, old, ts(1000, 0))); res.Code != command.CodeProtectionTooOld {
		t.Fatalf("protect of a timestamp too old: %+v", res)
	}
	if res := s.propose(user, protectCmd(command.KindProtect, p, ts(1000, 0))); res.Code != command.CodeNotMeta {
		t.Fatalf("protect on a user range: %+v", res)
	}
	recs, err := rangesm.ReadProtections(s.db)
	if err != nil || len(recs) != 2 {
		t.Fatalf("records: %+v %v", recs, err)
	}
	got := recs[0]
	if got.ID != r1.NodeID || got.Timestamp != ts(600, 0) || string(got.Start) != "a" || string(got.End) != "m" ||
		got.Expiry != 5000 || got.Created != ts(1000, 0) || got.Description != "backup b1" {
		t.Fatalf("record: %+v", got)
	}
	if !got.Overlaps([]byte("l"), []byte("z")) || got.Overlaps([]byte("m"), nil) || !recs[1].Overlaps([]byte("zz"), nil) {
		t.Fatalf("overlaps wrong for %+v / %+v", got, recs[1])
	}

	// Refresh: extends, never shortens.
	id := r1.NodeID
	if res := s.propose(meta, protectCmd(command.KindProtect, command.Protect{ID: id, Expiry: 9000}, ts(2000, 0))); res.Err() != nil || res.NodeID != id {
		t.Fatalf("refresh: %+v", res)
	}
	s.propose(meta, protectCmd(command.KindProtect, command.Protect{ID: id, Expiry: 7000}, ts(2001, 0)))
	if recs, _ := rangesm.ReadProtections(s.db); recs[0].Expiry != 9000 || recs[0].Timestamp != ts(600, 0) {
		t.Fatalf("after refreshes: %+v", recs[0])
	}
	// A conditional release the refresh overtook leaves the record.
	if res := s.propose(meta, protectCmd(command.KindRelease, command.Protect{ID: id, ExpiredBy: 8000}, ts(8000, 0))); res.Err() != nil || res.Found {
		t.Fatalf("release if expired by 8000 of a record expiring at 9000: %+v", res)
	}
	// Expired as of the proposal: no refresh.
	if res := s.propose(meta, protectCmd(command.KindProtect, command.Protect{ID: id, Expiry: 20000}, ts(9000, 0))); res.Code != command.CodeProtectionNotFound {
		t.Fatalf("refresh of an expired record: %+v", res)
	}
	if res := s.propose(meta, protectCmd(command.KindRelease, command.Protect{ID: id, ExpiredBy: 9000}, ts(9001, 0))); res.Err() != nil || !res.Found {
		t.Fatalf("release of an expired record: %+v", res)
	}
	if res := s.propose(meta, protectCmd(command.KindRelease, command.Protect{ID: id}, ts(9002, 0))); res.Code != command.CodeProtectionNotFound {
		t.Fatalf("second release: %+v", res)
	}
	if res := s.propose(meta, protectCmd(command.KindProtect, command.Protect{ID: 999, Expiry: 1 << 40}, ts(9003, 0))); res.Code != command.CodeProtectionNotFound {
		t.Fatalf("refresh of an unknown record: %+v", res)
	}
	if res := s.propose(meta, protectCmd(command.KindRelease, command.Protect{ID: r2.NodeID}, ts(9004, 0))); res.Err() != nil || !res.Found {
		t.Fatalf("release: %+v", res)
	}
	if recs, err := rangesm.ReadProtections(s.db); err != nil || len(recs) != 0 {
		t.Fatalf("records left: %+v %v", recs, err)
	}
	// IDs are never reused.
	if res := s.propose(meta, protectCmd(command.KindProtect, p, ts(1000, 0))); res.NodeID != r2.NodeID+1 {
		t.Fatalf("protect after releases: %+v", res)
	}
}
