package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// deleteAttached deletes, range by range, each of keys whose newest
// version is still attached to lease id (the sweep of an ended lease,
// lease_lessor.go). It runs on meta's leader, which finds each key's
// range in its copy of meta, and sends each range's keys to that range's
// leader (LeaseInternal.DeleteAttached). A range that split or merged
// since is looked up again. It returns the keys deleted; every call is
// idempotent, so an error leaves the sweep to be run again.
func (n *Node) deleteAttached(ctx context.Context, id uint64, keys [][]byte) (uint64, error) {
	var deleted uint64
	for attempt := 0; len(keys) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return deleted, ctx.Err()
			case <-time.After(min(time.Duration(attempt)*50*time.Millisecond, time.Second)):
			}
		}
		// Group the keys by the range meta says holds them.
		var groups []*kvpb.RangeDescriptor
		byRange := map[uint64][][]byte{}
		for _, k := range keys {
			ds, err := n.store.MetaLookup(k, 0)
			if err != nil || len(ds) == 0 {
				return deleted, fmt.Errorf("looking up the range of %q: %v", k, err)
			}
			d := ds[0]
			if _, ok := byRange[d.GetRangeId()]; !ok {
				groups = append(groups, d)
			}
			byRange[d.GetRangeId()] = append(byRange[d.GetRangeId()], k)
		}
		var again [][]byte
		for _, d := range groups {
			ks := byRange[d.GetRangeId()]
			got, err := n.deleteAttachedOnRange(ctx, id, d, ks)
			deleted += got
			if err != nil {
				if ctx.Err() != nil {
					return deleted, err
				}
				n.log.Debug("lease sweep: range batch failed; retrying", "lease", id, "range", d.GetRangeId(), "err", err)
				again = append(again, ks...)
			}
		}
		keys = again
	}
	return deleted, nil
}

// deleteAttachedOnRange sends one range's keys to its leader, following
// NotLeader hints among the range's replicas.
func (n *Node) deleteAttachedOnRange(ctx context.Context, id uint64, d *kvpb.RangeDescriptor, ks [][]byte) (uint64, error) {
	req := &kvpb.LeaseDeleteAttachedRequest{
		Header: &kvpb.RequestHeader{RangeId: d.GetRangeId(), RangeGeneration: d.GetGeneration()},
		Id:     id, Keys: ks,
	}
	target := n.leaderOf(d.GetRangeId()).GetNodeId()
	var last error = errors.New("the range has no replicas")
	reps := d.GetReplicas()
	for i := 0; i < 2*len(reps)+1; i++ {
		if target == 0 && len(reps) > 0 {
			target = reps[i%len(reps)].GetNodeId()
		}
		if target == 0 {
			break
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var resp *kvpb.LeaseDeleteAttachedResponse
		cc, err := n.peers.conn(target)
		if target == n.ident.NodeID {
			resp, err = (&leaseInternalServer{n: n}).DeleteAttached(cctx, req)
		} else if err == nil {
			resp, err = kvpb.NewLeaseInternalClient(cc).DeleteAttached(cctx, req)
		}
		cancel()
		if err == nil {
			return resp.GetDeleted(), nil
		}
		last = err
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unavailable && st.Code() != codes.FailedPrecondition &&
			st.Code() != codes.DeadlineExceeded && st.Code() != codes.Unknown {
			// A range key mismatch (split, merge) or another refusal: the
			// caller looks the range up again.
			return 0, err
		}
		target = notLeaderHint(err)
	}
	return 0, last
}
