package node

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
)

// This file is the one place requests are checked against the wire
// protocol's rules and the Limits, before anything is read or written.
// Every check returns an InvalidArgument status naming the field (and the
// limit, with a LimitExceeded detail); a refused request changes nothing.

func (l *Limits) checkKey(field string, k []byte) error {
	if len(k) == 0 {
		return invalidArgument(field, "key is empty; keys are 1 to %d bytes", l.MaxKeySize)
	}
	if len(k) > l.MaxKeySize {
		return limitExceeded(field, "key", "max_key_size", l.MaxKeySize, len(k))
	}
	return nil
}

// checkBound checks a span bound: empty is allowed (unbounded).
func (l *Limits) checkBound(field string, k []byte) error {
	if len(k) > l.MaxKeySize {
		return limitExceeded(field, "bound", "max_key_size", l.MaxKeySize, len(k))
	}
	return nil
}

func (l *Limits) checkValue(field string, v []byte) error {
	if len(v) > l.MaxValueSize {
		return limitExceeded(field, "value", "max_value_size", l.MaxValueSize, len(v))
	}
	return nil
}

// checkSpan checks [start, end) where either may be empty (unbounded).
func (l *Limits) checkSpan(prefix string, start, end []byte) error {
	if err := l.checkBound(prefix+"start_key", start); err != nil {
		return err
	}
	if err := l.checkBound(prefix+"end_key", end); err != nil {
		return err
	}
	if len(end) > 0 && bytes.Compare(start, end) > 0 {
		return invalidArgument(prefix+"start_key", "start_key %q is after end_key %q", clip(start), clip(end))
	}
	return nil
}

// checkDeleteSpan is checkSpan for deletions, which refuse an unbounded
// span on both sides: an empty request must not wipe the key space. (To
// delete every key, send start_key "\x00": every key is at or after it.)
func (l *Limits) checkDeleteSpan(prefix string, start, end []byte) error {
	if len(start) == 0 && len(end) == 0 {
		return invalidArgument(prefix+"start_key", "both start_key and end_key are empty; refusing to delete the whole key space (send start_key \"\\x00\" to mean it)")
	}
	return l.checkSpan(prefix, start, end)
}

func (l *Limits) checkWriteBytes(n int) error {
	if n > l.MaxWriteBytes {
		return limitExceeded("request", "the request's keys and values", "max_write_bytes", l.MaxWriteBytes, n)
	}
	return nil
}

func checkConsistency(h *kvpb.RequestHeader) error {
	switch c := h.GetReadConsistency(); c {
	case kvpb.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE, kvpb.ReadConsistency_READ_CONSISTENCY_STALE:
		return nil
	case kvpb.ReadConsistency_READ_CONSISTENCY_BOUNDED_STALE:
		if h.GetMaxStalenessUs() <= 0 && h.GetReadTimestamp() == nil {
			return invalidArgument("header.max_staleness_us", "a BOUNDED_STALE read needs a positive max_staleness_us, not %d", h.GetMaxStalenessUs())
		}
		return nil
	default:
		return invalidArgument("header.read_consistency", "unknown read consistency %d", int32(c))
	}
}

func (l *Limits) checkGet(req *kvpb.GetRequest) error {
	if err := checkConsistency(req.GetHeader()); err != nil {
		return err
	}
	return l.checkKey("key", req.GetKey())
}

func (l *Limits) checkPut(req *kvpb.PutRequest) error {
	if err := l.checkKey("key", req.GetKey()); err != nil {
		return err
	}
	return l.checkValue("value", req.GetValue())
}

func (l *Limits) checkDelete(req *kvpb.DeleteRequest) error {
	return l.checkKey("key", req.GetKey())
}

// checkScan checks a Scan and returns its effective limits.
func (l *Limits) checkScan(req *kvpb.ScanRequest) (limit int, maxBytes int, err error) {
	if err := checkConsistency(req.GetHeader()); err != nil {
		return 0, 0, err
	}
	if err := l.checkSpan("", req.GetStartKey(), req.GetEndKey()); err != nil {
		return 0, 0, err
	}
	lim := req.GetLimit()
	switch {
	case lim == 0:
		lim = l.DefaultScanLimit
	case lim > l.MaxScanLimit:
		return 0, 0, countExceeded("limit", "entries requested", "max_scan_limit", int(l.MaxScanLimit), int(lim))
	}
	mb := req.GetMaxBytes()
	switch {
	case mb == 0:
		mb = l.DefaultScanBytes
	case mb > l.MaxScanBytes:
		return 0, 0, limitExceeded("max_bytes", "max_bytes", "max_scan_bytes", int(l.MaxScanBytes), int(min(mb, 1<<62)))
	}
	return int(lim), int(mb), nil
}

func (l *Limits) checkBatchGet(req *kvpb.BatchGetRequest) error {
	if err := checkConsistency(req.GetHeader()); err != nil {
		return err
	}
	keys := req.GetKeys()
	if len(keys) > l.MaxBatchOps {
		return countExceeded("keys", "keys", "max_batch_ops", l.MaxBatchOps, len(keys))
	}
	for i, k := range keys {
		if err := l.checkKey(fmt.Sprintf("keys[%d]", i), k); err != nil {
			return err
		}
	}
	return nil
}

func (l *Limits) checkBatch(req *kvpb.BatchRequest) error {
	muts := req.GetMutations()
	if len(muts) > l.MaxBatchOps {
		return countExceeded("mutations", "mutations", "max_batch_ops", l.MaxBatchOps, len(muts))
	}
	total := 0
	for i, m := range muts {
		field := fmt.Sprintf("mutations[%d]", i)
		switch op := m.GetOp().(type) {
		case *kvpb.Mutation_Put:
			if err := l.checkKey(field+".put.key", op.Put.GetKey()); err != nil {
				return err
			}
			if err := l.checkValue(field+".put.value", op.Put.GetValue()); err != nil {
				return err
			}
			total += len(op.Put.GetKey()) + len(op.Put.GetValue())
		case *kvpb.Mutation_Delete:
			if err := l.checkKey(field+".delete.key", op.Delete.GetKey()); err != nil {
				return err
			}
			total += len(op.Delete.GetKey())
		case *kvpb.Mutation_DeleteRange:
			dr := op.DeleteRange
			if err := l.checkDeleteSpan(field+".delete_range.", dr.GetStartKey(), dr.GetEndKey()); err != nil {
				return err
			}
			total += len(dr.GetStartKey()) + len(dr.GetEndKey())
		case nil:
			return invalidArgument(field, "no operation set (want put, delete or delete_range)")
		default:
			return invalidArgument(field, "unknown operation %T", op)
		}
	}
	return l.checkWriteBytes(total)
}

func (l *Limits) checkCompareAndSwap(req *kvpb.CompareAndSwapRequest) error {
	if err := l.checkKey("key", req.GetKey()); err != nil {
		return err
	}
	if req.GetExpectAbsent() && len(req.GetExpectedValue()) > 0 {
		return invalidArgument("expected_value", "must be empty when expect_absent is set")
	}
	if req.GetDelete() && len(req.GetNewValue()) > 0 {
		return invalidArgument("new_value", "must be empty when delete is set")
	}
	if err := l.checkValue("expected_value", req.GetExpectedValue()); err != nil {
		return err
	}
	if err := l.checkValue("new_value", req.GetNewValue()); err != nil {
		return err
	}
	return nil
}

func (l *Limits) checkDeleteRange(req *kvpb.DeleteRangeRequest) error {
	return l.checkDeleteSpan("", req.GetStartKey(), req.GetEndKey())
}

// clip shortens a key for an error message.
func clip(k []byte) []byte {
	if len(k) > 32 {
		return append(k[:32:32], "..."...)
	}
	return k
}
