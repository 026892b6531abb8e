package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
)

// Administrative operations: leader transfers, splits, merges and
// membership changes, one at a time, each on its own goroutine (they make
// several blocking calls in a row; with one at a time no other goroutine
// calls into a Store while one runs, except clients' single calls).

// scheduleAdmin starts an administrative operation every 50-250 ms of
// the faulty phase (unless one runs).
func (w *workload) scheduleAdmin() {
	s := w.s
	at := s.clock.Now().Add(50*time.Millisecond + time.Duration(s.rng.Int64N(int64(200*time.Millisecond))))
	if !at.Before(s.end) {
		return
	}
	s.schedule(at, "", func() {
		w.admin()
		w.scheduleAdmin()
	})
}

// admin starts an administrative operation on a range's leader unless
// one runs.
func (w *workload) admin() {
	s := w.s
	if w.adminBusy {
		return
	}
	type cand struct {
		nd *node
		d  *kvpb.RangeDescriptor
	}
	var cands []cand
	for _, nd := range s.nodes {
		if !nd.up || s.paused(nd) {
			continue
		}
		for _, r := range nd.store.Replicas() {
			if d := r.Descriptor(); d != nil && len(d.GetReplicas()) > 0 && !keys.IsMetaRange(d) && r.IsLeader() {
				cands = append(cands, cand{nd, d})
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	c := cands[s.rng.IntN(len(cands))]
	nd, d, st := c.nd, c.d, c.nd.store
	var what string
	var fn func(ctx context.Context) error
	// Transfers 20%, splits 25%, merges 35%, replica changes 20%; a
	// merge of ranges on different nodes first moves a replica.
	kind := s.rng.IntN(20)
	switch {
	case kind < 4:
		kind = 0
	case kind < 9:
		kind = 1
	case kind < 16:
		kind = 2
		if right := rightOf(st, d); right != nil && alignChange(d, right, nd.id) != nil {
			kind = 3
		}
	default:
		kind = 3
	}
	switch kind {
	case 0:
		target := d.GetReplicas()[s.rng.IntN(len(d.GetReplicas()))].GetNodeId()
		what = fmt.Sprintf("transfer r%d to n%d", d.GetRangeId(), target)
		fn = func(ctx context.Context) error { return st.TransferLeader(ctx, d.GetRangeId(), target) }
	case 1:
		key := w.keys[1+s.rng.IntN(numKeys-1)]
		if !keys.ContainsUserKey(d, []byte(key)) || string(d.GetStartKey()) == key {
			return
		}
		what = fmt.Sprintf("split r%d at %s", d.GetRangeId(), key)
		fn = func(ctx context.Context) error { _, _, err := st.Split(ctx, d.GetRangeId(), []byte(key)); return err }
	case 2:
		if len(d.GetEndKey()) == 0 {
			return
		}
		what = fmt.Sprintf("merge r%d", d.GetRangeId())
		fn = func(ctx context.Context) error { _, err := st.Merge(ctx, d.GetRangeId()); return err }
	case 3:
		// Move one replica: half the time towards the right-hand
		// neighbour's nodes (so that merges can happen), else add the
		// node without one or remove one (never below three voters).
		change := alignChange(d, rightOf(st, d), nd.id)
		if change == nil || s.rng.IntN(2) == 0 {
			change = nil
			for _, cand := range s.nodes {
				if replicaOn(d, cand.id) == nil {
					change = &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: cand.id}
					break
				}
			}
			if change == nil || len(d.GetReplicas()) > 3 {
				var others []uint64
				for _, rd := range d.GetReplicas() {
					if rd.GetNodeId() != nd.id {
						others = append(others, rd.GetNodeId())
					}
				}
				victim := others[s.rng.IntN(len(others))]
				change = &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_REMOVE, NodeId: victim}
			}
		}
		what = fmt.Sprintf("change r%d %s n%d", d.GetRangeId(), change.GetKind(), change.GetNodeId())
		fn = func(ctx context.Context) error {
			_, err := st.ChangeReplicas(ctx, d.GetRangeId(), []*kvpb.ReplicaChange{change})
			return err
		}
	}
	w.adminBusy = true
	s.res.AdminTried++
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w.adminDone, w.adminWhat, w.adminCancel = done, what, cancel
	s.tracef("admin begin %s", what)
	s.schedule(s.clock.Now().Add(3*time.Second), "", cancel)
	go func() { done <- fn(ctx) }()
}

// collectAdmin handles the administrative operation's end.
func (w *workload) collectAdmin() bool {
	if !w.adminBusy {
		return false
	}
	select {
	case err := <-w.adminDone:
		w.adminBusy = false
		w.adminCancel()
		if err == nil {
			w.s.res.Admin++
			w.s.tracef("admin done %s", w.adminWhat)
		} else {
			w.s.tracef("admin failed %s: %v", w.adminWhat, err)
		}
		return true
	default:
		return false
	}
}

// rightOf returns the descriptor of the range after d, as st knows it.
func rightOf(st interface {
	Replicas() []*raft.Replica
}, d *kvpb.RangeDescriptor) *kvpb.RangeDescriptor {
	if len(d.GetEndKey()) == 0 {
		return nil
	}
	for _, r := range st.Replicas() {
		if o := r.Descriptor(); o != nil && len(o.GetReplicas()) > 0 && string(o.GetStartKey()) == string(d.GetEndKey()) {
			return o
		}
	}
	return nil
}

// alignChange is a change that brings d's replicas closer to right's (a
// merge needs both on the same nodes), never removing leader's replica.
func alignChange(d, right *kvpb.RangeDescriptor, leader uint64) *kvpb.ReplicaChange {
	if right == nil {
		return nil
	}
	for _, rd := range right.GetReplicas() {
		if replicaOn(d, rd.GetNodeId()) == nil {
			return &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: rd.GetNodeId()}
		}
	}
	if len(d.GetReplicas()) <= 3 {
		return nil
	}
	for _, rd := range d.GetReplicas() {
		if replicaOn(right, rd.GetNodeId()) == nil && rd.GetNodeId() != leader {
			return &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_REMOVE, NodeId: rd.GetNodeId()}
		}
	}
	return nil
}

func replicaOn(d *kvpb.RangeDescriptor, nodeID uint64) *kvpb.ReplicaDescriptor {
	for _, r := range d.GetReplicas() {
		if r.GetNodeId() == nodeID {
			return r
		}
	}
	return nil
}
