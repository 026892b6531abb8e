package rangesm

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// Deduplication of client writes (docs/replication.md, "Ambiguity and
// deduplication").
//
// A write that carries a client ID is applied at most once per
// (client_id, request_seq): the first application stores its result in a
// dedup record, range-local replicated state, and a later entry with the
// same pair (a retry of an ambiguous write) returns that stored result
// without applying again. Records are kept within a window, and collected
// deterministically at apply time:
//
//   - by sequence: when a client's request_seq reaches a multiple of
//     dedupGCStride, its records more than dedupSeqWindow seqs older are
//     deleted (one range deletion);
//   - by time: each range's leader periodically proposes a DedupGC command
//     whose proposer_time is a cutoff; applying it deletes the records
//     written (by proposer time) before the cutoff.
//
// Either way the client's floor, the lowest seq still deduplicated, moves
// up; a retry below the floor is rejected as CodeDedupWindowExpired (the
// server reports it as ambiguous) instead of being applied a second time.
// Floors themselves are collected dedupFloorRetention after their last
// use.
//
// The window constants are part of the replicated state machine: every
// replica must use the same values, so they are constants, not flags.
// DO NOT CHANGE them without a versioned migration.
const (
	dedupSeqWindow      = 8192
	dedupGCStride       = 256
	dedupFloorRetention = 24 * time.Hour
)

// Dedup values (docs/formats.md):
//
//	dedup record := 0x01 proposer_time:fixed64 result   (command.Result encoding)
//	dedup floor  := 0x01 floor_seq:fixed64 last_time:fixed64
const dedupVersion byte = 0x01

func encodeDedupRecord(ts int64, res *command.Result) []byte {
	b := make([]byte, 0, 24+len(res.Value)+len(res.Message))
	b = append(b, dedupVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(ts))
	return res.Encode(b)
}

func decodeDedupRecord(v []byte) (int64, command.Result, error) {
	if len(v) < 9 || v[0] != dedupVersion {
		return 0, command.Result{}, fmt.Errorf("dedup record of %d bytes", len(v))
	}
	ts := int64(binary.LittleEndian.Uint64(v[1:]))
	res, err := command.DecodeResult(v[9:])
	return ts, res, err
}

func encodeDedupFloor(seq uint64, ts int64) []byte {
	b := []byte{dedupVersion}
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint64(b, uint64(ts))
}

func decodeDedupFloor(v []byte) (uint64, int64, error) {
	if len(v) != 17 || v[0] != dedupVersion {
		return 0, 0, fmt.Errorf("dedup floor of %d bytes", len(v))
	}
	return binary.LittleEndian.Uint64(v[1:]), int64(binary.LittleEndian.Uint64(v[9:])), nil
}

// applyDeduplicated applies a client write at most once.
// REQUIRES: the replica's raftMu.
func (r *Range) applyDeduplicated(cmd *command.Command) (command.Result, error) {
	a := &r.ov
	dc, err := r.dedupClient(cmd.ClientID)
	if err != nil {
		return command.Result{}, err
	}
	recKey := keys.DedupRecordKey(r.rangeID, cmd.ClientID, cmd.RequestSeq)
	// The cache says when there is certainly no record (a seq above every
	// recorded one); otherwise the record is read.
	if has, known := dc.recorded(cmd.RequestSeq); has || !known {
		v, found, err := a.get(recKey)
		if err != nil {
			return command.Result{}, err
		}
		if found {
			_, res, err := decodeDedupRecord(v)
			if err != nil {
				return command.Result{}, fmt.Errorf("client %d seq %d: %w", cmd.ClientID, cmd.RequestSeq, err)
			}
			r.host.Counters().DedupHits.Inc()
			return res, nil
		}
		if has {
			// The engine is the truth; the cache is wrong (a bug).
			r.log.Error("dedup cache out of step with the engine; emptied", "range", r.rangeID,
				"client", cmd.ClientID, "seq", cmd.RequestSeq)
			r.dedup.clear()
			if dc, err = r.dedupClient(cmd.ClientID); err != nil {
				return command.Result{}, err
			}
		}
	}
	floor := dc.floor
	if cmd.RequestSeq < floor {
		return command.Result{Code: command.CodeDedupWindowExpired,
			Message: fmt.Sprintf("client %d request %d is older than the dedup window (floor %d)", cmd.ClientID, cmd.RequestSeq, floor)}, nil
	}
	res, err := r.evaluate(cmd)
	if err != nil || res.Code != command.CodeOK {
		// A rejection changed nothing: a retry may evaluate afresh.
		return res, err
	}
	a.put(recKey, encodeDedupRecord(cmd.ProposerTime, &res))
	dc.record(cmd.RequestSeq)
	if s := cmd.RequestSeq; s >= dedupSeqWindow && s%dedupGCStride == 0 {
		if nf := s - dedupSeqWindow; nf > floor {
			span := keys.DedupClientSpan(r.rangeID, cmd.ClientID, 0, nf)
			a.delRange(span.Start, span.End)
			a.put(keys.DedupFloorKey(r.rangeID, cmd.ClientID), encodeDedupFloor(nf, cmd.ProposerTime))
			dc.floor = nf
		}
	}
	return res, nil
}

// applyDedupGC deletes the dedup records written before the
// command's proposer_time, raising their clients' floors.
// REQUIRES: the replica's raftMu.
func (r *Range) applyDedupGC(cmd *command.Command) (command.Result, error) {
	a := &r.ov
	// The scan reads the engine: write what is staged first (a batch cut),
	// so it sees every earlier entry.
	if err := r.flush(); err != nil {
		return command.Result{}, err
	}
	cutoff := cmd.ProposerTime
	type floorUpdate struct {
		seq uint64
		ts  int64
	}
	raise := map[uint64]floorUpdate{}
	span := keys.DedupRecordSpan(r.rangeID)
	it, err := a.db.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return command.Result{}, err
	}
	var dels [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		client, seq, err := keys.DecodeDedupRecordKey(it.UnsafeKey())
		if err != nil {
			it.Close()
			return command.Result{}, err
		}
		ts, _, err := decodeDedupRecord(it.UnsafeValue())
		if err != nil {
			it.Close()
			return command.Result{}, err
		}
		if ts >= cutoff {
			continue
		}
		dels = append(dels, it.Key())
		if f := raise[client]; seq+1 > f.seq {
			raise[client] = floorUpdate{seq: seq + 1, ts: ts}
		}
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return command.Result{}, err
	}
	for _, k := range dels {
		a.del(k)
	}
	for client, f := range raise {
		fk := keys.DedupFloorKey(r.rangeID, client)
		old, _, err := a.get(fk)
		if err != nil {
			return command.Result{}, err
		}
		if old != nil {
			if oldSeq, _, err := decodeDedupFloor(old); err == nil && oldSeq > f.seq {
				f.seq = oldSeq
			}
		}
		a.put(fk, encodeDedupFloor(f.seq, f.ts))
	}
	// Floors unused for dedupFloorRetention past the cutoff go too.
	floorCutoff := cutoff - int64(dedupFloorRetention)
	fspan := keys.DedupFloorSpan(r.rangeID)
	it, err = a.db.NewIter(&storage.IterOptions{LowerBound: fspan.Start, UpperBound: fspan.End})
	if err != nil {
		return command.Result{}, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		_, ts, err := decodeDedupFloor(it.UnsafeValue())
		if err != nil {
			it.Close()
			return command.Result{}, err
		}
		client, err := keys.DecodeDedupFloorKey(it.UnsafeKey())
		if err != nil {
			it.Close()
			return command.Result{}, err
		}
		if _, raised := raise[client]; ts < floorCutoff && !raised {
			a.del(it.Key())
		}
	}
	err = it.Error()
	it.Close()
	return command.Result{}, err
}
