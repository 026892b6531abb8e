package rangesm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// Transaction records (docs/transactions.md, "Several ranges" and "Push
// and recovery").
//
// A transaction across ranges has one record, on the range holding its
// record key (its first written key), kept in that range's range-local
// keyspace (keys.TxnRecordKey) so that snapshots carry it; a split or a
// merge moves it with its record key. The coordinator writes it STAGING
// (its staging bound S, C0 or above, and the keys of its intents) in
// parallel with the intents: the transaction is committed once the
// record is STAGING at S and every listed intent is in at p <= S, at
// C = the highest p (docs/transactions.md, "Pushed intents"). Then the
// record is marked COMMITTED (at that C) before any intent is
// resolved, so a STAGING record means no intent of it has been resolved
// yet. ABORTED is final: a record aborted while missing can never be
// staged, which is how a transaction whose coordinator died before
// staging is stopped.
//
// The record's state only moves forward: none -> STAGING -> COMMITTED, or
// none/STAGING -> ABORTED; a COMMITTED or ABORTED record is deleted once
// its intents are resolved. Every op is safe to apply twice. A commit may
// carry the keys of the intents its range holds, which it resolves in the
// same command (the record range's resolution folded into COMMITTED), and
// a delete the IDs of more finished records to delete with it.
//
//	record := 0x01 status:u8 heartbeat:fixed64 timestamp record_key:bytes
//	          count:uvarint key:bytes{count}
//	status := 1 STAGING | 2 COMMITTED | 3 ABORTED
//	timestamp := hlc.Encode (12 bytes): the staging bound S while STAGING,
//	             C once COMMITTED

const txnRecordVersion byte = 0x01

// TxnStatus is a transaction record's state. DO NOT CHANGE the values:
// they are stored in records.
type TxnStatus uint8

const (
	// TxnMissing: there is no record (as a state read or answered).
	TxnMissing   TxnStatus = 0
	TxnStaging   TxnStatus = 1
	TxnCommitted TxnStatus = 2
	TxnAborted   TxnStatus = 3
)

func (s TxnStatus) String() string {
	switch s {
	case TxnMissing:
		return "MISSING"
	case TxnStaging:
		return "STAGING"
	case TxnCommitted:
		return "COMMITTED"
	case TxnAborted:
		return "ABORTED"
	}
	return fmt.Sprintf("TxnStatus(%d)", uint8(s))
}

// TxnRecord is a transaction's record.
type TxnRecord struct {
	ID     command.TxnID
	Status TxnStatus
	// Heartbeat is the coordinator's wall clock (Unix nanoseconds) when it
	// last staged or heartbeat the record: pushers abort a STAGING record
	// whose heartbeat is too old (docs/transactions.md).
	Heartbeat int64
	// Timestamp is the staging bound S while STAGING (the transaction
	// commits at the highest p of its intents, all at or below S), the
	// commit timestamp once COMMITTED.
	Timestamp hlc.Timestamp
	RecordKey []byte
	// Keys are the keys of the transaction's intents.
	Keys [][]byte
}

func encodeTxnRecord(rec *TxnRecord) []byte {
	n := 1 + 1 + 8 + hlc.EncodedLen + binary.MaxVarintLen32*(2+len(rec.Keys)) + len(rec.RecordKey)
	for _, k := range rec.Keys {
		n += len(k)
	}
	b := make([]byte, 0, n)
	b = append(b, txnRecordVersion, byte(rec.Status))
	b = binary.LittleEndian.AppendUint64(b, uint64(rec.Heartbeat))
	b = rec.Timestamp.AppendEncode(b)
	b = binary.AppendUvarint(b, uint64(len(rec.RecordKey)))
	b = append(b, rec.RecordKey...)
	b = binary.AppendUvarint(b, uint64(len(rec.Keys)))
	for _, k := range rec.Keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

func decodeTxnRecord(id command.TxnID, v []byte) (TxnRecord, error) {
	bad := func(what string) (TxnRecord, error) {
		return TxnRecord{}, fmt.Errorf("record of transaction %s: %s (%d bytes)", id, what, len(v))
	}
	const fixed = 2 + 8 + hlc.EncodedLen
	if len(v) < fixed || v[0] != txnRecordVersion {
		return bad("bad header")
	}
	rec := TxnRecord{ID: id, Status: TxnStatus(v[1]), Heartbeat: int64(binary.LittleEndian.Uint64(v[2:]))}
	if rec.Status < TxnStaging || rec.Status > TxnAborted {
		return bad(fmt.Sprintf("unknown status %d", v[1]))
	}
	ts, err := hlc.Decode(v[10:fixed])
	if err != nil {
		return bad(err.Error())
	}
	rec.Timestamp = ts
	rest := v[fixed:]
	var ok bool
	if rec.RecordKey, ok = takeField(&rest); !ok {
		return bad("bad record key")
	}
	count, m := binary.Uvarint(rest)
	if m <= 0 || count > uint64(len(rest)) {
		return bad("bad key count")
	}
	rest = rest[m:]
	rec.Keys = make([][]byte, count)
	for i := range rec.Keys {
		if rec.Keys[i], ok = takeField(&rest); !ok {
			return bad("bad key")
		}
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	return rec, nil
}

// ReadTxnRecord returns transaction id's record as range rangeID's
// replica on r has applied it (Status TxnMissing when there is none). A
// caller deciding on it reads at the range's leader after a read barrier.
func ReadTxnRecord(r logstore.Reader, rangeID uint64, id command.TxnID) (TxnRecord, error) {
	v, err := r.Get(keys.TxnRecordKey(rangeID, id[:]))
	if errors.Is(err, storage.ErrNotFound) {
		return TxnRecord{ID: id}, nil
	}
	if err != nil {
		return TxnRecord{}, err
	}
	return decodeTxnRecord(id, v)
}

// ReadTxnRecordOwned is ReadTxnRecord with range rangeID's descriptor
// and freeze (desc nil when the range is not here: rangeView), all read
// from one consistent view of this node's engine. The record answers for
// its key only if that view shows the range owning the key and not
// frozen: then it is the record as the range's log left it at some
// point. Read apart, the record under rangeID and the replica's
// descriptor in memory disagree while a merge applies: the merge's
// batch moves the right-hand range's records to the left-hand range's
// ID, and the right-hand replica, retired, still describes its span
// (docs/transactions.md, "Records").
func ReadTxnRecordOwned(db *storage.DB, rangeID uint64, id command.TxnID) (rec TxnRecord, desc *kvpb.RangeDescriptor, frozen bool, err error) {
	snap, err := db.NewSnapshot()
	if err != nil {
		return TxnRecord{}, nil, false, err
	}
	defer snap.Close()
	if desc, frozen, err = rangeView(snap, rangeID); err != nil || desc == nil {
		return TxnRecord{ID: id}, nil, false, err
	}
	rec, err = ReadTxnRecord(snap, rangeID, id)
	return rec, desc, frozen, err
}

// txnRecordResult is the answer of every record op: the record after it
// (NodeID: its status; Version: its timestamp; Found: it exists).
func txnRecordResult(rec *TxnRecord) command.Result {
	return command.Result{Found: rec.Status != TxnMissing, NodeID: uint64(rec.Status), Version: rec.Timestamp}
}

// applyTxnRecord applies one op to a transaction record.
// REQUIRES: the replica's raftMu.
func (r *Range) applyTxnRecord(cmd *command.Command) (command.Result, error) {
	t := &cmd.TxnRecord
	if !keys.ContainsUserKey(r.desc, t.RecordKey) {
		return outOfRange(r.desc, t.RecordKey), nil
	}
	key := keys.TxnRecordKey(r.rangeID, t.ID[:])
	rec := TxnRecord{ID: t.ID}
	if v, found, err := r.ov.get(key); err != nil {
		return command.Result{}, err
	} else if found {
		if rec, err = decodeTxnRecord(t.ID, v); err != nil {
			return command.Result{}, fmt.Errorf("range %d: %w", r.rangeID, err)
		}
	}
	changed := false
	switch t.Op {
	case command.TxnStage:
		switch {
		case t.Timestamp.IsZero() || len(t.Keys) == 0:
			return command.Result{Code: command.CodeMalformed, Message: "a stage needs a timestamp and the keys of the intents"}, nil
		case rec.Status == TxnMissing:
			rec = TxnRecord{ID: t.ID, Status: TxnStaging, Heartbeat: t.Heartbeat, Timestamp: t.Timestamp, RecordKey: t.RecordKey, Keys: t.Keys}
			changed = true
		case rec.Status == TxnStaging && rec.Timestamp.LessEq(t.Timestamp):
			// A re-stage: the bound raised to the intents' highest
			// provisional version, after a refresh of the reads (or a
			// retry of the same stage).
			rec.Timestamp, rec.Keys, rec.Heartbeat = t.Timestamp, t.Keys, max(rec.Heartbeat, t.Heartbeat)
			changed = true
		}
	case command.TxnCommitRecord:
		// C is the highest p of the intents: at or below S when the
		// transaction committed by its record (implicitly, or as
		// recovery found it), above S when its coordinator decides on
		// its own that its reads hold at C; a race with recovery's
		// conditional abort is won by whichever applies first.
		if rec.Status == TxnStaging && !t.Timestamp.IsZero() {
			rec.Status, rec.Timestamp = TxnCommitted, t.Timestamp
			changed = true
		}
		if rec.Status == TxnCommitted && len(t.Keys) > 0 {
			// The coordinator's resolution of the intents this range
			// holds, folded into the commit: the record is COMMITTED in
			// the same command, so no intent is resolved while it is
			// STAGING. At the record's C, whoever decided it.
			res, err := r.applyTxnResolve(&command.Command{Kind: command.KindTxnResolve, TxnResolve: command.TxnResolve{
				ID: t.ID, Committed: true, CommitTimestamp: rec.Timestamp, Keys: t.Keys}})
			if err != nil || res.Code != command.CodeOK {
				return res, err
			}
		}
	case command.TxnAbort:
		switch {
		case rec.Status == TxnMissing:
			rec = TxnRecord{ID: t.ID, Status: TxnAborted, RecordKey: t.RecordKey}
			changed = true
		case rec.Status == TxnStaging && (t.Timestamp.IsZero() || rec.Timestamp == t.Timestamp):
			rec.Status = TxnAborted
			changed = true
		}
	case command.TxnHeartbeat:
		if rec.Status == TxnStaging && rec.Heartbeat < t.Heartbeat {
			rec.Heartbeat = t.Heartbeat
			changed = true
		}
	case command.TxnDelete:
		// Keys, if any, are the IDs of more records to delete: the
		// coordinator deletes its finished records in batches. One not
		// in this range (moved by a split) or not finished is left.
		more := make([]command.TxnID, 0, len(t.Keys))
		for _, b := range t.Keys {
			if len(b) == command.TxnIDLen {
				more = append(more, command.TxnID(b))
			}
		}
		if err := r.deleteFinishedRecords(more); err != nil {
			return command.Result{}, err
		}
		if rec.Status == TxnCommitted || rec.Status == TxnAborted {
			r.ov.del(key)
			r.markRecordsChanged()
			return command.Result{}, nil
		}
	}
	if changed {
		r.ov.put(key, encodeTxnRecord(&rec))
		r.markRecordsChanged()
	}
	return txnRecordResult(&rec), nil
}

// deleteFinishedRecords deletes the records of ids that this range
// holds and that are finished (COMMITTED or ABORTED); the others are
// left.
// REQUIRES: the replica's raftMu.
func (r *Range) deleteFinishedRecords(ids []command.TxnID) error {
	for _, id := range ids {
		k := keys.TxnRecordKey(r.rangeID, id[:])
		v, found, err := r.ov.get(k)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		o, err := decodeTxnRecord(id, v)
		if err != nil {
			return fmt.Errorf("range %d: %w", r.rangeID, err)
		}
		if o.Status == TxnCommitted || o.Status == TxnAborted {
			r.ov.del(k)
			r.markRecordsChanged()
		}
	}
	return nil
}

// markRecordsChanged records that the entry being applied changed
// replicated transaction state: it is written with the MVCC state, so a
// restart does not apply it a second time (mvcc_state.go, through).
// REQUIRES: the replica's raftMu.
func (r *Range) markRecordsChanged() {
	r.st.through, r.stDirty = r.applying, true
}

// applyTxnPrevent is recovery's check of a staging transaction's intents
// on this range (docs/transactions.md, "Records"): Found is set when
// every listed key holds an intent of the transaction at or below the
// staging bound S, and Version is then the highest of their provisional
// versions (the transaction, if every range finds its intents, is
// committed at the highest over all ranges). Otherwise the frontier rises
// to S, so that a missing intent, if it is ever written, lands above S:
// the transaction can then never be committed under S, and the caller
// may abort its record. Value is the first key found missing.
// REQUIRES: the replica's raftMu.
func (r *Range) applyTxnPrevent(cmd *command.Command) (command.Result, error) {
	t := &cmd.TxnPrevent
	for _, k := range t.Keys {
		if !keys.ContainsUserKey(r.desc, k) {
			return outOfRange(r.desc, k), nil
		}
	}
	var highest hlc.Timestamp
	for _, k := range t.Keys {
		in, found, err := r.intentOn(k)
		if err != nil {
			return command.Result{}, err
		}
		if !found || in.Txn != t.ID || t.Timestamp.Less(in.Provisional) {
			r.advance(t.Timestamp)
			return command.Result{Value: append([]byte{}, k...)}, nil
		}
		highest = highest.Forward(in.Provisional)
	}
	return command.Result{Found: true, Version: highest}, nil
}

// moveTxnRecords stages the move of the records whose record key is in
// [start, end) out of this range: into range to's keyspace when keep is
// set (see moveIntents). It reads the engine: the caller flushed the
// apply batch.
// REQUIRES: the replica's raftMu.
func (r *Range) moveTxnRecords(start, end []byte, to uint64, keep bool) error {
	sp := keys.TxnRecordSpan(r.rangeID)
	it, err := r.db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		idb, err := keys.DecodeTxnRecordKey(it.UnsafeKey())
		if err != nil {
			return err
		}
		var id command.TxnID
		copy(id[:], idb)
		rec, err := decodeTxnRecord(id, it.UnsafeValue())
		if err != nil {
			return err
		}
		if bytes.Compare(rec.RecordKey, start) < 0 || (len(end) > 0 && bytes.Compare(rec.RecordKey, end) >= 0) {
			continue
		}
		if keep {
			r.ov.put(keys.TxnRecordKey(to, id[:]), it.Value())
		}
		r.ov.del(keys.TxnRecordKey(r.rangeID, id[:]))
	}
	return it.Error()
}

// takeOverTxnRecords stages a copy of range from's records into this
// range's keyspace (a merge; the caller deletes from's range-local
// span).
// REQUIRES: the replica's raftMu, and the apply batch flushed.
func (r *Range) takeOverTxnRecords(from uint64) error {
	sp := keys.TxnRecordSpan(from)
	it, err := r.db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		id, err := keys.DecodeTxnRecordKey(it.UnsafeKey())
		if err != nil {
			return err
		}
		r.ov.put(keys.TxnRecordKey(r.rangeID, id), it.Value())
	}
	return it.Error()
}
