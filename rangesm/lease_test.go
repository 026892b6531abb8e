package rangesm_test

import (
	"testing"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

func leaseCmd(k command.Kind, l command.Lease, t hlc.Timestamp) *command.Command {
	return &command.Command{Header: command.Header{Timestamp: t}, Kind: k, Lease: l}
}

func leasePut(k, v string, id uint64, t, deadline hlc.Timestamp) *command.Command {
	return &command.Command{Header: command.Header{Timestamp: t}, Kind: command.KindLeasePut,
		Lease:     command.Lease{ID: id, Deadline: deadline},
		Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte(k), Value: []byte(v)}}}
}

// TestLeaseLifecycle: grant allocates IDs, attach records keys and the
// last attach, a revoked lease takes no attaches, swept removes the
// record and its attachments; lease commands on a user range are refused.
func TestLeaseLifecycle(t *testing.T) {
	s := newStore(t)
	meta := keys.MetaRangeID
	g1 := s.propose(meta, leaseCmd(command.KindLeaseGrant, command.Lease{TTLMillis: 5000}, ts(10, 0)))
	g2 := s.propose(meta, leaseCmd(command.KindLeaseGrant, command.Lease{TTLMillis: 7000}, ts(11, 0)))
	if g1.Err() != nil || g2.Err() != nil || g1.NodeID == 0 || g2.NodeID != g1.NodeID+1 {
		t.Fatalf("grants: %+v %+v", g1, g2)
	}
	id := g1.NodeID
	if res := s.propose(meta, leaseCmd(command.KindLeaseGrant, command.Lease{ID: id, TTLMillis: 1}, ts(12, 0))); res.Code != command.CodeLeaseExists {
		t.Fatalf("grant of an ID in use: %+v", res)
	}
	if res := s.propose(user, leaseCmd(command.KindLeaseGrant, command.Lease{TTLMillis: 1}, ts(12, 0))); res.Code != command.CodeNotMeta {
		t.Fatalf("grant on a user range: %+v", res)
	}
	for i, k := range []string{"b", "a"} {
		if res := s.propose(meta, leaseCmd(command.KindLeaseAttach, command.Lease{ID: id, Key: []byte(k)}, ts(int64(20+i), 0))); res.Err() != nil {
			t.Fatalf("attach %s: %+v", k, res)
		}
	}
	if res := s.propose(meta, leaseCmd(command.KindLeaseAttach, command.Lease{ID: 999, Key: []byte("a")}, ts(30, 0))); res.Code != command.CodeLeaseNotFound {
		t.Fatalf("attach to an unknown lease: %+v", res)
	}
	l, found, err := rangesm.ReadLease(s.db, id)
	if err != nil || !found || l.TTLMillis != 5000 || l.Ended || l.LastAttach != ts(21, 0) {
		t.Fatalf("record: %+v %v %v", l, found, err)
	}
	if atts, err := rangesm.LeaseAttachments(s.db, id, 0); err != nil || len(atts) != 2 || string(atts[0]) != "a" || string(atts[1]) != "b" {
		t.Fatalf("attachments: %q %v", atts, err)
	}
	if res := s.propose(meta, leaseCmd(command.KindLeaseSwept, command.Lease{ID: id}, ts(40, 0))); res.Code != command.CodeMalformed {
		t.Fatalf("swept while live: %+v", res)
	}
	if res := s.propose(meta, leaseCmd(command.KindLeaseRevoke, command.Lease{ID: id, Expired: true}, ts(41, 0))); res.Err() != nil {
		t.Fatalf("revoke: %+v", res)
	}
	if res := s.propose(meta, leaseCmd(command.KindLeaseRevoke, command.Lease{ID: id}, ts(42, 0))); res.Code != command.CodeLeaseNotFound {
		t.Fatalf("second revoke: %+v", res)
	}
	if res := s.propose(meta, leaseCmd(command.KindLeaseAttach, command.Lease{ID: id, Key: []byte("c")}, ts(43, 0))); res.Code != command.CodeLeaseNotFound {
		t.Fatalf("attach after revoke: %+v", res)
	}
	if l, _, _ := rangesm.ReadLease(s.db, id); !l.Ended || !l.Expired {
		t.Fatalf("after revoke: %+v", l)
	}
	if res := s.propose(meta, leaseCmd(command.KindLeaseSwept, command.Lease{ID: id}, ts(44, 0))); res.Err() != nil || res.NodeID != 2 {
		t.Fatalf("swept: %+v", res)
	}
	if _, found, _ := rangesm.ReadLease(s.db, id); found {
		t.Fatal("record survived the sweep")
	}
	if atts, _ := rangesm.LeaseAttachments(s.db, id, 0); len(atts) != 0 {
		t.Fatalf("attachments survived the sweep: %q", atts)
	}
	ls, err := rangesm.ReadLeases(s.db)
	if err != nil || len(ls) != 1 || ls[0].ID != g2.NodeID {
		t.Fatalf("leases left: %+v %v", ls, err)
	}
}

// TestLeasePutWindowAndDelete: a leased put applies within its window and
// is refused past it (nothing written); a lease delete removes only keys
// still attached to the lease, and raises the frontier so that a slow
// leased put arriving after it is refused.
func TestLeasePutWindowAndDelete(t *testing.T) {
	s := newStore(t)
	if res := s.propose(user, leasePut("a", "1", 7, ts(100, 0), ts(200, 0))); res.Err() != nil || res.Version != ts(100, 0) {
		t.Fatalf("leased put: %+v", res)
	}
	s.propose(user, leasePut("b", "1", 7, ts(101, 0), ts(200, 0)))
	s.propose(user, put("b", "plain", ts(102, 0))) // overwrites without the lease
	// Past its window: refused, nothing written.
	if res := s.propose(user, leasePut("c", "1", 7, ts(300, 0), ts(200, 0))); res.Code != command.CodeLeaseWindowPassed {
		t.Fatalf("put past its window: %+v", res)
	}
	rd := rangesm.NewReader(s.db)
	if _, found, _ := rd.Get([]byte("c"), hlc.MaxTimestamp); found {
		t.Fatal("refused put wrote its key")
	}
	del := leaseCmd(command.KindLeaseDelete, command.Lease{ID: 7, Keys: [][]byte{[]byte("a"), []byte("b"), []byte("z")}}, ts(250, 0))
	if res := s.propose(user, del); res.Err() != nil || res.NodeID != 1 || res.Version != ts(250, 0) {
		t.Fatalf("lease delete: %+v", res)
	}
	if _, found, _ := rd.Get([]byte("a"), hlc.MaxTimestamp); found {
		t.Fatal("a survived the lease delete")
	}
	if kv, found, _ := rd.Get([]byte("b"), hlc.MaxTimestamp); !found || string(kv.Value) != "plain" || kv.Lease != 0 {
		t.Fatalf("b: %+v %v, want the plain put", kv, found)
	}
	// A delete that finds nothing still raises the frontier.
	s.propose(user, leaseCmd(command.KindLeaseDelete, command.Lease{ID: 7, Keys: [][]byte{[]byte("q")}}, ts(400, 0)))
	if f := s.state(user).Frontier; f != ts(400, 0) {
		t.Fatalf("frontier %s, want 400,0", f)
	}
	// A put proposed before with a window below the delete: refused.
	if res := s.propose(user, leasePut("q", "1", 7, ts(350, 0), ts(399, 0))); res.Code != command.CodeLeaseWindowPassed {
		t.Fatalf("slow leased put after the delete: %+v", res)
	}
	// Keys outside the range: refused whole.
	out := leaseCmd(command.KindLeaseDelete, command.Lease{ID: 7, Keys: [][]byte{[]byte("a")}}, ts(500, 0))
	if res := s.propose(keys.MetaRangeID, out); res.Code != command.CodeKeyOutOfRange {
		t.Fatalf("lease delete on meta: %+v", res)
	}
}

// TestLeaseBatchAndCAS: a batch with leased puts writes all its
// mutations at one version, the leased keys attached to their leases,
// and writes nothing when any leased put is past its window; a leased
// compare-and-swap attaches the new value when the comparison holds,
// writes nothing when it fails or is past its window, and a lease delete
// then removes what they attached.
func TestLeaseBatchAndCAS(t *testing.T) {
	s := newStore(t)
	rd := rangesm.NewReader(s.db)
	batch := func(t0, d1, d2 hlc.Timestamp) *command.Command {
		return &command.Command{Header: command.Header{Timestamp: t0}, Kind: command.KindLeaseBatch, Mutations: []command.Mutation{
			{Kind: command.KindLeasePut, Key: []byte("a"), Value: []byte("1"), Lease: 7, Deadline: d1},
			{Kind: command.KindPut, Key: []byte("b"), Value: []byte("plain")},
			{Kind: command.KindLeasePut, Key: []byte("c"), Value: []byte("3"), Lease: 8, Deadline: d2},
		}}
	}
	// One leased put past its window: the whole batch is refused.
	if res := s.propose(user, batch(ts(100, 0), ts(200, 0), ts(50, 0))); res.Code != command.CodeLeaseWindowPassed {
		t.Fatalf("batch past a window: %+v", res)
	}
	if _, found, _ := rd.Get([]byte("a"), hlc.MaxTimestamp); found {
		t.Fatal("a refused batch wrote a key")
	}
	if res := s.propose(user, batch(ts(110, 0), ts(200, 0), ts(200, 0))); res.Err() != nil || res.Version != ts(110, 0) {
		t.Fatalf("leased batch: %+v", res)
	}
	for k, want := range map[string]uint64{"a": 7, "b": 0, "c": 8} {
		if kv, found, _ := rd.Get([]byte(k), hlc.MaxTimestamp); !found || kv.Lease != want || kv.Version != ts(110, 0) {
			t.Fatalf("%s: %+v %v, want lease %d at 110", k, kv, found, want)
		}
	}
	cas := func(k string, expect hlc.Timestamp, t0, deadline hlc.Timestamp) *command.Command {
		return &command.Command{Header: command.Header{Timestamp: t0}, Kind: command.KindLeaseCAS,
			Lease: command.Lease{ID: 9, Deadline: deadline},
			CAS:   command.CAS{Key: []byte(k), ExpectVersion: true, ExpectedVersion: expect, NewValue: []byte("swapped")}}
	}
	// A failed comparison writes nothing and says what is there.
	if res := s.propose(user, cas("b", ts(1, 0), ts(120, 0), ts(300, 0))); res.Err() != nil || res.Succeeded || !res.Found || res.CurrentVersion != ts(110, 0) {
		t.Fatalf("CAS on the wrong version: %+v", res)
	}
	// Past its window: refused, nothing written.
	if res := s.propose(user, cas("b", ts(110, 0), ts(130, 0), ts(125, 0))); res.Code != command.CodeLeaseWindowPassed {
		t.Fatalf("CAS past its window: %+v", res)
	}
	if res := s.propose(user, cas("b", ts(110, 0), ts(140, 0), ts(300, 0))); res.Err() != nil || !res.Succeeded || res.Version != ts(140, 0) {
		t.Fatalf("leased CAS: %+v", res)
	}
	if kv, found, _ := rd.Get([]byte("b"), hlc.MaxTimestamp); !found || kv.Lease != 9 || string(kv.Value) != "swapped" || kv.Created != ts(110, 0) {
		t.Fatalf("b after the leased CAS: %+v %v", kv, found)
	}
	del := leaseCmd(command.KindLeaseDelete, command.Lease{ID: 9, Keys: [][]byte{[]byte("a"), []byte("b")}}, ts(400, 0))
	if res := s.propose(user, del); res.Err() != nil || res.NodeID != 1 {
		t.Fatalf("lease delete of 9: %+v (want b alone deleted: a is lease 7's)", res)
	}
}
