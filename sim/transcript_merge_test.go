package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/apply"
)

// The merge transcripts' commands (testdata/transcript/merge.txt):
//
//	split node=L key=m [lead=F2] split the first user range (left) at m;
//	                             binds right to the new right-hand range,
//	                             led by node= (or lead=)
//	hold node=F2 range=right     hold F2's replica of right behind its log:
//	                             entries commit there but do not apply
//	                             (raft.TestingKnobs.HoldApply)
//	release node=F2 range=right  let them apply
//	freeze                       propose right's Freeze for a merge into
//	                             left, on right's leader (step 1 of the
//	                             protocol in raft's merge.go)
//	merge-entry node=L           propose left's Merge with that freeze's
//	                             index, as the coordinator would once every
//	                             replica of right applied it (step 2),
//	                             without waiting for them
//	merge node=L                 the whole merge: raft.Store.Merge, which
//	                             waits for every replica of right to apply
//	                             the freeze, and aborts when one does not
//	replicas                     each named node's replicas of left and
//	                             right: span, frozen, apply held (by hold,
//	                             or at the merge gate), or gone
//
// freeze, merge-entry and merge take the wait=, timeout= and as= of
// propose.
func (h *transcript) mergeCmd(d *datadriven.TestData) string {
	switch d.Cmd {
	case "split":
		return h.split(d)
	case "hold", "release":
		id, rangeID := h.node(d, "node"), h.rangeArg(d)
		h.s.holds.set(replicaKey{id, rangeID}, d.Cmd == "hold")
		return "ok"
	case "freeze":
		return h.freeze(d)
	case "merge-entry":
		return h.start1(d, "merge-entry", h.mergeEntry)
	case "merge":
		left := h.ranges["left"]
		return h.start1(d, "merge", func(ctx context.Context, st *raft.Store, d *datadriven.TestData) string {
			if _, err := st.Merge(ctx, left); err != nil {
				return "merge failed, " + outcome(err)
			}
			return "merged"
		})
	case "replicas":
		return h.notes() + h.replicas()
	}
	d.Fatalf(h.t, "unknown command %s", d.Cmd)
	return ""
}

// rangeArg is the range named by range= (left or right).
func (h *transcript) rangeArg(d *datadriven.TestData) uint64 {
	var name string
	d.ScanArgs(h.t, "range", &name)
	id, ok := h.ranges[name]
	if !ok {
		d.Fatalf(h.t, "unknown range %q", name)
	}
	return id
}

// split splits left at key= on node=, then runs until right has a leader
// that has applied its log and, if that is another node, moves right's
// leadership to node= (TransferLeader, on right's leader): one node then
// leads both ranges, and the script's writes and reads of either go there.
// lead=F2 moves right's leadership to F2 instead.
func (h *transcript) split(d *datadriven.TestData) string {
	var key string
	d.ScanArgs(h.t, "key", &key)
	id := h.node(d, "node")
	if d.HasArg("lead") {
		id = h.node(d, "lead")
	}
	left := h.ranges["left"]
	var right *kvpb.RangeDescriptor
	out := h.start1(d, "split", func(ctx context.Context, st *raft.Store, d *datadriven.TestData) string {
		l, r, err := st.Split(ctx, left, []byte(key))
		if err != nil {
			return "split failed, " + outcome(err)
		}
		right = r
		return fmt.Sprintf("split: left %s, right %s", span(l), span(r))
	})
	if right == nil {
		return out
	}
	rightID := right.GetRangeId()
	h.ranges["right"] = rightID
	leads := func() uint64 {
		for _, nd := range h.s.nodes[:h.s.opts.Nodes] {
			if st, ok := h.rangeStatus(nd.id, rightID); ok && st.State == "leader" && st.Applied >= st.LastIndex {
				return nd.id
			}
		}
		return 0
	}
	h.until(10*time.Second, func() bool { return leads() != 0 })
	if lead := leads(); lead != 0 && lead != id {
		done := make(chan error, 1)
		st := h.s.node(lead).store
		go func() { done <- st.TransferLeader(context.Background(), rightID, id) }()
		h.s.settle()
		finished := false
		h.until(10*time.Second, func() bool {
			select {
			case <-done:
				finished = true
			default:
			}
			return finished && leads() == id
		})
	}
	if leads() != id {
		return out + "\nright has no leader on " + h.nameOf(id)
	}
	if d.HasArg("lead") {
		return h.notes() + out + "\n" + h.nameOf(id) + " leads right"
	}
	return h.notes() + out + "\n" + h.nameOf(id) + " leads both"
}

// freeze proposes right's Freeze on the node leading right.
func (h *transcript) freeze(d *datadriven.TestData) string {
	leftID, rightID := h.ranges["left"], h.ranges["right"]
	var lead *node
	for _, nd := range h.s.nodes {
		if st, ok := h.rangeStatus(nd.id, rightID); ok && st.State == "leader" {
			lead = nd
		}
	}
	if lead == nil {
		return "right has no leader"
	}
	ldesc, rdesc := h.descOn(lead.id, leftID), h.descOn(lead.id, rightID)
	if ldesc == nil || rdesc == nil {
		return "right's leader holds no replica of left"
	}
	cmd := &command.Command{Kind: command.KindFreeze, ExpectedGeneration: rdesc.GetGeneration(),
		LeftRangeID: leftID, LeftGeneration: ldesc.GetGeneration()}
	return h.start1At(d, lead, "freeze", func(ctx context.Context, st *raft.Store, d *datadriven.TestData) string {
		res, idx, err := st.Propose(ctx, rightID, cmd)
		if err == nil && res.Err() != nil {
			return "rejected: " + res.Err().Error()
		}
		if err == nil {
			h.freezeIdx = idx
			return "right frozen"
		}
		return outcome(err)
	})
}

// mergeEntry proposes left's Merge with the last freeze's index and
// right's frozen descriptor, as the proposing node knows them.
func (h *transcript) mergeEntry(ctx context.Context, st *raft.Store, d *datadriven.TestData) string {
	leftID, rightID := h.ranges["left"], h.ranges["right"]
	ldesc, rdesc := h.descOn(st.NodeID(), leftID), h.descOn(st.NodeID(), rightID)
	if ldesc == nil || rdesc == nil || h.freezeIdx == 0 {
		return "no frozen right-hand range here"
	}
	cmd := &command.Command{Kind: command.KindMerge, ExpectedGeneration: ldesc.GetGeneration(),
		FreezeIndex: h.freezeIdx, Right: apply.CloneDescriptor(rdesc)}
	res, _, err := st.Propose(ctx, leftID, cmd)
	if err == nil && res.Err() != nil {
		return "rejected: " + res.Err().Error()
	}
	if err == nil {
		return "merged: left " + span(apply.MergedDescriptor(ldesc, rdesc))
	}
	return outcome(err)
}

// descOn is node id's descriptor of range rangeID (nil if it has none).
func (h *transcript) descOn(id, rangeID uint64) *kvpb.RangeDescriptor {
	st := h.s.node(id).storeIfUp()
	if st == nil {
		return nil
	}
	r, err := st.Replica(rangeID)
	if err != nil {
		return nil
	}
	return r.Descriptor()
}

// replicas describes each named node's replicas of the named ranges.
func (h *transcript) replicas() string {
	var names []string
	for n := range h.names {
		names = append(names, n)
	}
	sort.Strings(names)
	var rnames []string
	for n := range h.ranges {
		rnames = append(rnames, n)
	}
	sort.Strings(rnames)
	var b strings.Builder
	for _, n := range names {
		id := h.names[n]
		var parts []string
		for _, rn := range rnames {
			rangeID := h.ranges[rn]
			st, ok := h.rangeStatus(id, rangeID)
			if !ok {
				parts = append(parts, rn+" gone")
				continue
			}
			p := rn + " " + span(st.Descriptor)
			if st.Descriptor == nil {
				p = rn + " uninitialized"
			}
			if st.Held != 0 {
				if h.s.holds.holds(id, rangeID) {
					p += " apply held"
				} else {
					p += " waiting at the merge gate"
				}
			}
			if r, err := h.s.node(id).store.Replica(rangeID); err == nil && r.Frozen() {
				p += " frozen"
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(&b, "%s: %s\n", n, strings.Join(parts, "; "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// span prints a descriptor's user key span.
func span(d *kvpb.RangeDescriptor) string {
	if d == nil {
		return "[?]"
	}
	end := "∞"
	if len(d.GetEndKey()) > 0 {
		end = fmt.Sprintf("%q", d.GetEndKey())
	}
	return fmt.Sprintf("[%q, %s)", d.GetStartKey(), end)
}
