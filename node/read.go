package node

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/rangesm"
)

// closeTimeout bounds a Close proposed for reads (read_close.go).
const closeTimeout = 10 * time.Second

// readBarrier waits until r may serve a linearizable read and returns
// the applied index the read will see at least: the leader's barrier
// (ReadIndex or lease, docs/replication.md "Reads and leases").
func (n *Node) readBarrier(ctx context.Context, op string, r *raft.Replica) (uint64, error) {
	if err := n.awaitLeader(ctx, op, r, r.Descriptor()); err != nil {
		return 0, err
	}
	idx, err := r.ReadBarrier(ctx)
	if err != nil {
		return 0, n.raftError(op, err)
	}
	// A range frozen for a merge serves no linearizable read: once the
	// merge commits, writes to its keys go to the left-hand range, which
	// this replica does not see. The barrier waited for the commit index,
	// so a read that began after the freeze committed sees the freeze.
	if r.Frozen() {
		return 0, n.raftError(op, r.FrozenError())
	}
	return idx, nil
}

// readTimestamp decides the timestamp a read is served at on r and waits
// until r may serve it (docs/versions.md, "The frontier rule"):
//
//   - read_timestamp set: refused below the range's GC threshold
//     (FailedPrecondition, HistoryCompacted) or beyond the node's clock
//     plus the maximum offset (InvalidArgument); at or below the replica's
//     frontier F it is served as it is, by any replica, with no barrier
//     (versions there never change); above F the leader closes it first
//     (read_close.go) and a follower answers NotLeader.
//   - none, BOUNDED_STALE: the follower read (boundedStale); STALE is a
//     BOUNDED_STALE read with no bound (docs/versions.md, "Follower
//     reads").
//   - none, a read of this range alone: the linearizable barrier, then the
//     replica's F: every write acknowledged before the read began is at or
//     below it. No extra round.
//   - none, the first part of a read across ranges (multiRange: a Scan
//     that goes on past this range, a BatchGet not marked whole, whose
//     other groups the client reads at the answer's timestamp): a
//     timestamp from the
//     node's TimestampSource, closed on this range first. The range's F
//     would not do: another range may hold acknowledged writes above it,
//     which the later parts, read at F, would miss.
//
// It returns the timestamp, the applied index the read sees at least, and
// whether the timestamp is the replica's frontier (readPastIntents).
func (n *Node) readTimestamp(ctx context.Context, op string, h *kvpb.RequestHeader, r *raft.Replica, multiRange bool) (hlc.Timestamp, uint64, bool, error) {
	if err := n.observeHeader(op, h); err != nil {
		return hlc.Timestamp{}, 0, false, err
	}
	rt, explicit, err := timestampFromProto("header.read_timestamp", h.GetReadTimestamp())
	if err != nil {
		return hlc.Timestamp{}, 0, false, err
	}
	if c := h.GetReadConsistency(); !explicit && (c == kvpb.ReadConsistency_READ_CONSISTENCY_BOUNDED_STALE ||
		c == kvpb.ReadConsistency_READ_CONSISTENCY_STALE) {
		ts, idx, err := n.boundedStale(ctx, op, h, r)
		return ts, idx, false, err
	}
	if !explicit {
		idx, err := n.readBarrier(ctx, op, r)
		if err != nil {
			return hlc.Timestamp{}, 0, false, err
		}
		st := mvccState(r)
		if multiRange || st.Frontier.IsZero() {
			// (A range never written is closed once, so that its answer
			// names a timestamp later pages can read at.)
			ts, err := n.timestamps.Now(ctx)
			if err != nil {
				return hlc.Timestamp{}, 0, false, unavailable(100*time.Millisecond, "%s: no timestamp to read at: %v", op, err)
			}
			if err := n.closeAt(ctx, op, r, ts); err != nil {
				return hlc.Timestamp{}, 0, false, err
			}
			_ = n.clock.Update(ts) // issued by this node's source
			return ts, r.AppliedIndex(), false, nil
		}
		// The clock follows what the node serves. (A refusal here would
		// mean a frontier far ahead of this clock; the read is stable
		// either way.)
		_ = n.clock.Update(st.Frontier)
		return st.Frontier, idx, true, nil
	}
	if limit := n.clock.PhysicalNow() + int64(n.clock.MaxOffset()); rt.WallTime > limit {
		return hlc.Timestamp{}, 0, false, invalidArgument("header.read_timestamp",
			"future timestamp %s: beyond this node's clock plus the maximum clock offset (%v)", rt, n.clock.MaxOffset())
	}
	st := mvccState(r)
	if err := mvcc.CheckReadTimestamp(rt, st.GCThreshold); err != nil {
		return hlc.Timestamp{}, 0, false, historyCompacted(op, r.RangeID(), rt, st.GCThreshold)
	}
	if st.Frontier.Less(rt) {
		if err := n.closeAt(ctx, op, r, rt); err != nil {
			return hlc.Timestamp{}, 0, false, err
		}
	}
	_ = n.clock.Update(rt) // within the offset: checked above
	return rt, r.AppliedIndex(), false, nil
}

// recheckGC refuses a read at ts that a GC overtook while it read. The
// read's engine view was opened after readTimestamp checked ts against
// the range's GC threshold; a GC applied since may have deleted versions
// that view needed. A GC publishes its threshold before its deletes reach
// the engine (rangesm/gc.go), so checking again after the read is done
// sees the new threshold whenever the view could have missed versions.
func recheckGC(op string, r *raft.Replica, ts hlc.Timestamp) error {
	if g := mvccState(r).GCThreshold; ts.Less(g) {
		return historyCompacted(op, r.RangeID(), ts, g)
	}
	return nil
}

// boundedStale serves a BOUNDED_STALE read (docs/versions.md, "Follower
// reads"): any replica serves it at its frontier F, with no barrier and
// without asking the leader, if F is no older than the node's clock minus
// max_staleness_us. Otherwise a follower answers NotLeader (the client
// goes to the leader), and the leader closes the current time first. A
// leader that gets such reads with its F older than half their bound
// keeps its range's F fresh for a while (freshnessLoop), so that its
// followers can serve the next ones.
//
// A STALE read is one with no bound: any replica that has applied a write
// or a close serves it at its F, however old (what STALE always meant:
// whatever this replica has applied), and does not keep the range fresh.
func (n *Node) boundedStale(ctx context.Context, op string, h *kvpb.RequestHeader, r *raft.Replica) (hlc.Timestamp, uint64, error) {
	unbounded := h.GetReadConsistency() == kvpb.ReadConsistency_READ_CONSISTENCY_STALE
	maxStale := time.Duration(h.GetMaxStalenessUs()) * time.Microsecond
	idx := r.AppliedIndex()
	st := mvccState(r)
	now := n.clock.PhysicalNow()
	if !st.Frontier.IsZero() && (unbounded || st.Frontier.WallTime >= now-int64(maxStale)) {
		n.metrics.followerReads.Inc()
		_ = n.clock.Update(st.Frontier) // the clock follows what the node serves
		if !unbounded && st.Frontier.WallTime < now-int64(maxStale/2) && r.IsLeader() {
			// Served, but the frontier is past half the bound: keep the
			// range fresh before the followers have to refuse.
			n.closes.wanted(r.RangeID(), time.Now(), maxStale)
		}
		return st.Frontier, idx, nil
	}
	if !r.IsLeader() {
		return hlc.Timestamp{}, 0, n.raftError(op, r.NotLeaderError())
	}
	if !unbounded {
		n.closes.wanted(r.RangeID(), time.Now(), maxStale)
	}
	ts := n.clock.Now()
	if err := n.closeAt(ctx, op, r, ts); err != nil {
		return hlc.Timestamp{}, 0, err
	}
	return ts, r.AppliedIndex(), nil
}

// historyCompacted refuses a read below a range's GC threshold.
func historyCompacted(op string, rangeID uint64, rt, threshold hlc.Timestamp) error {
	st := status.Newf(codes.FailedPrecondition, "%s: history compacted: read timestamp %s is below range %d's GC threshold %s",
		op, rt, rangeID, threshold)
	return withDetails(st, &kvpb.HistoryCompacted{RangeId: rangeID,
		ReadTimestamp: rangesm.TimestampProto(rt), GcThreshold: rangesm.TimestampProto(threshold)})
}

// readHeader is the response header of a read served at ts.
func (n *Node) readHeader(r *raft.Replica, idx uint64, ts hlc.Timestamp) *kvpb.ResponseHeader {
	h := n.respHeader(r, idx)
	h.ReadTimestamp = rangesm.TimestampProto(ts)
	return h
}

// Get reads one key.
func (s *kvServer) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if err := s.n.limits.checkGet(req); err != nil {
		return nil, err
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), req.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.n.checkKey(req.GetHeader(), desc, req.GetKey()); err != nil {
		return nil, err
	}
	committed, err := committedTxns(req.GetCommitted(), s.n.limits.MaxBatchOps)
	if err != nil {
		return nil, err
	}
	var kv mvcc.KeyValue
	var found bool
	ts, idx, err := s.n.readPast(ctx, "Get", req.GetHeader(), r, desc, false, func(rd rangesm.Reader, ts hlc.Timestamp) (err error) {
		kv, found, err = rd.WithCommitted(committed).Get(req.GetKey(), ts)
		return err
	})
	if err != nil {
		return nil, err // readPast: readTimestamp's as they are, the read's through readError
	}
	if err := recheckGC("Get", r, ts); err != nil {
		return nil, err
	}
	resp := &kvpb.GetResponse{Header: s.n.readHeader(r, idx, ts), Found: found}
	if found {
		resp.Value = kv.Value
		resp.Version, resp.CreateVersion = rangesm.TimestampProto(kv.Version), rangesm.TimestampProto(kv.Created)
	}
	return resp, nil
}

// Scan reads one page of [start_key, end_key) from a consistent engine view
// (the iterator's), forward or in reverse.
//
// A page also ends at the range's boundary when the request goes on past
// it: more is then set and resume_key is the boundary (the range's end key
// forward, its start key in reverse), so that the client continues in the
// next range.
//
// A page ends at the request's limit or max_bytes. It always holds at least
// one entry when one exists, so max_bytes can be exceeded by one entry but
// a scan always makes progress. When it stops early, more is set and
// resume_key says where to continue: the next key for a forward scan (the
// next start_key), the last returned key for a reverse scan (the next,
// exclusive, end_key).
func (s *kvServer) Scan(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	limit, maxBytes, err := s.n.limits.checkScan(req)
	if err != nil {
		return nil, err
	}
	routeKey := req.GetStartKey()
	if req.GetReverse() && len(req.GetEndKey()) > 0 {
		// The range holding the last key before end.
		routeKey = kvpb.KeyBefore(req.GetEndKey())
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), routeKey)
	if err != nil {
		return nil, err
	}
	start, end, err := s.n.clipToRange(req.GetHeader(), desc, req.GetStartKey(), req.GetEndKey(), req.GetReverse())
	if err != nil {
		return nil, err
	}
	_, multiRange := rangeBoundaryResume(desc, req.GetStartKey(), req.GetEndKey(), req.GetReverse())
	var page rangesm.ScanPage
	ts, idx, err := s.n.readPast(ctx, "Scan", req.GetHeader(), r, desc, multiRange, func(rd rangesm.Reader, ts hlc.Timestamp) (err error) {
		page, err = rd.Scan(rangesm.ScanOptions{Start: start, End: end, Timestamp: ts, Reverse: req.GetReverse(), KeysOnly: req.GetKeysOnly(),
			Limit: limit, MaxBytes: maxBytes})
		return err
	})
	if err != nil {
		return nil, err // readPast: readTimestamp's as they are, the read's through readError
	}
	if err := recheckGC("Scan", r, ts); err != nil {
		return nil, err
	}
	resp := &kvpb.ScanResponse{Header: s.n.readHeader(r, idx, ts), Kvs: page.Kvs, More: page.More, ResumeKey: page.ResumeKey}
	if !page.More {
		if rk, ok := rangeBoundaryResume(desc, req.GetStartKey(), req.GetEndKey(), req.GetReverse()); ok {
			// The range ended before the request did: the next range
			// continues it (docs/wire-protocol.md, "Scans across ranges").
			resp.More, resp.ResumeKey = true, rk
		}
	}
	return resp, nil
}

// BatchGet reads every key at one consistent point with one engine call.
func (s *kvServer) BatchGet(ctx context.Context, req *kvpb.BatchGetRequest) (*kvpb.BatchGetResponse, error) {
	if err := s.n.limits.checkBatchGet(req); err != nil {
		return nil, err
	}
	var first []byte
	if len(req.Keys) > 0 {
		first = req.Keys[0]
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), first)
	if err != nil {
		return nil, err
	}
	for _, k := range req.Keys {
		if err := s.n.checkKey(req.GetHeader(), desc, k); err != nil {
			return nil, err
		}
	}
	// The client sends a BatchGet's keys by range, and reads every other
	// group at this one's answer: a read across ranges, unless the request
	// is the whole read (every key in this range), served as a Get is.
	committed, err := committedTxns(req.GetCommitted(), s.n.limits.MaxBatchOps)
	if err != nil {
		return nil, err
	}
	var kvs []mvcc.KeyValue
	var found []bool
	ts, idx, err := s.n.readPast(ctx, "BatchGet", req.GetHeader(), r, desc, !req.GetWhole(), func(rd rangesm.Reader, ts hlc.Timestamp) (err error) {
		kvs, found, err = rd.WithCommitted(committed).MultiGet(req.Keys, ts)
		return err
	})
	if err != nil {
		return nil, err // readPast: readTimestamp's as they are, the read's through readError
	}
	if err := recheckGC("BatchGet", r, ts); err != nil {
		return nil, err
	}
	resp := &kvpb.BatchGetResponse{Header: s.n.readHeader(r, idx, ts), Results: make([]*kvpb.GetResult, len(kvs))}
	total := 0
	for i, kv := range kvs {
		total += len(kv.Value)
		res := &kvpb.GetResult{Found: found[i]}
		if found[i] {
			res.Value = kv.Value
			res.Version, res.CreateVersion = rangesm.TimestampProto(kv.Version), rangesm.TimestampProto(kv.Created)
		}
		resp.Results[i] = res
	}
	if total > s.n.limits.MaxResponseBytes {
		return nil, limitExceeded("keys", fmt.Sprintf("the values of %d keys", len(kvs)), "max_response_bytes",
			s.n.limits.MaxResponseBytes, total)
	}
	return resp, nil
}

// committedTxns returns a read's committed transactions (the client's
// word for its own, committed but perhaps not resolved: rangesm's
// Reader.WithCommitted), nil for none.
func committedTxns(cs []*kvpb.CommittedTxn, max int) (map[command.TxnID]hlc.Timestamp, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	if len(cs) > max {
		return nil, countExceeded("committed", "transactions", "max_batch_ops", max, len(cs))
	}
	m := make(map[command.TxnID]hlc.Timestamp, len(cs))
	for i, c := range cs {
		id, err := txnIDFromProto(c.GetTxnId())
		if err != nil {
			return nil, err
		}
		ts, ok, err := timestampFromProto(fmt.Sprintf("committed[%d].commit_timestamp", i), c.GetCommitTimestamp())
		if err != nil {
			return nil, err
		}
		if !ok || ts.IsZero() {
			return nil, invalidArgument(fmt.Sprintf("committed[%d].commit_timestamp", i), "a committed transaction needs its commit timestamp")
		}
		m[id] = ts
	}
	return m, nil
}

// intentRetryDelay is how long a client waits before it retries a read or
// a write that met an intent.
const intentRetryDelay = 50 * time.Millisecond

// reader returns the Reader of r's data and lock table. Called once the
// read's timestamp is settled (readTimestamp): the published state it
// goes by then covers every intent at or below that timestamp
// (rangesm/intent.go).
func (n *Node) reader(r *raft.Replica) rangesm.Reader {
	return n.data.WithLocks(rangesm.LocksOf(r.RangeID(), mvccState(r)))
}

func clone(b []byte) []byte { return append([]byte{}, b...) }
