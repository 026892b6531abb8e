package rangesm

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// Protected timestamps as applied (docs/versions.md, "Protected
// timestamps"). The meta range holds one record per protection; the GC
// queue of every node reads them from meta's leader before each pass and
// keeps each range's threshold at or below the timestamp of every record
// overlapping it (node/gc_queue.go). Nothing here looks at a clock: a
// record's expiry is compared with proposal timestamps only, and the
// meta leader removes expired records with a conditional release.
//
//	protection record := 0x01 timestamp start:bytes end:bytes
//	                     expiry:fixed64 created:timestamp description:bytes
//
// created is the proposal timestamp of the Protect that made it.

const protectionRecordVersion = 0x01

// protectionIDCounter names the meta counter that allocates protection IDs.
const protectionIDCounter = "protection-id"

// ProtectionRecord is a protected timestamp as meta holds it.
type ProtectionRecord struct {
	ID uint64
	// Timestamp is protected on every range overlapping [Start, End) (an
	// empty End: the key space's end).
	Timestamp  hlc.Timestamp
	Start, End []byte
	// Expiry is the wall time (Unix nanoseconds) past which the record
	// protects nothing.
	Expiry int64
	// Created is the proposal timestamp of the Protect that made it.
	Created     hlc.Timestamp
	Description string
}

// ExpiredAt reports whether the record has expired at wall time now
// (Unix nanoseconds).
func (p ProtectionRecord) ExpiredAt(now int64) bool { return p.Expiry <= now }

// Overlaps reports whether the record's span overlaps the user key span
// [start, end) (an empty end: the key space's end).
func (p ProtectionRecord) Overlaps(start, end []byte) bool {
	return (len(end) == 0 || string(p.Start) < string(end)) && (len(p.End) == 0 || string(start) < string(p.End))
}

func encodeProtectionRecord(p ProtectionRecord) []byte {
	b := []byte{protectionRecordVersion}
	b = p.Timestamp.AppendEncode(b)
	b = appendBytes(b, p.Start)
	b = appendBytes(b, p.End)
	b = binary.LittleEndian.AppendUint64(b, uint64(p.Expiry))
	b = p.Created.AppendEncode(b)
	return appendBytes(b, []byte(p.Description))
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func decodeProtectionRecord(id uint64, b []byte) (ProtectionRecord, error) {
	p := ProtectionRecord{ID: id}
	bad := func(what string) (ProtectionRecord, error) {
		return p, fmt.Errorf("protection %d: malformed record (%s)", id, what)
	}
	if len(b) < 1 || b[0] != protectionRecordVersion {
		return p, fmt.Errorf("protection %d: record of unknown version", id)
	}
	b = b[1:]
	ts := func() (hlc.Timestamp, bool) {
		if len(b) < hlc.EncodedLen {
			return hlc.Timestamp{}, false
		}
		t, err := hlc.Decode(b[:hlc.EncodedLen])
		b = b[hlc.EncodedLen:]
		return t, err == nil
	}
	bytesField := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		v := append([]byte(nil), b[k:k+int(n)]...)
		b = b[k+int(n):]
		return v, true
	}
	var ok bool
	if p.Timestamp, ok = ts(); !ok {
		return bad("timestamp")
	}
	if p.Start, ok = bytesField(); !ok {
		return bad("start")
	}
	if p.End, ok = bytesField(); !ok {
		return bad("end")
	}
	if len(b) < 8 {
		return bad("expiry")
	}
	p.Expiry = int64(binary.LittleEndian.Uint64(b))
	b = b[8:]
	if p.Created, ok = ts(); !ok {
		return bad("created")
	}
	d, ok := bytesField()
	if !ok || len(b) != 0 {
		return bad("description")
	}
	p.Description = string(d)
	return p, nil
}

// readProtection reads protection id's record through the overlay.
func (r *Range) readProtection(id uint64) (ProtectionRecord, bool, error) {
	v, found, err := r.ov.get(keys.ProtectionKey(id))
	if err != nil || !found {
		return ProtectionRecord{}, false, err
	}
	p, err := decodeProtectionRecord(id, v)
	return p, err == nil, err
}

func protectionNotFound(id uint64, why string) command.Result {
	return command.Result{Code: command.CodeProtectionNotFound, Message: fmt.Sprintf("protection %d %s", id, why)}
}

// applyProtect applies a KindProtect or KindRelease; a Protect's result
// NodeID is the record's ID, a Release's Found says it removed the record.
// REQUIRES: the replica's raftMu.
func (r *Range) applyProtect(cmd *command.Command) (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	c := &cmd.Protect
	if cmd.Kind == command.KindProtect && c.ID == 0 {
		return r.applyProtectCreate(cmd)
	}
	p, found, err := r.readProtection(c.ID)
	if err != nil {
		return command.Result{}, err
	}
	if !found {
		return protectionNotFound(c.ID, "not found (never created, released or expired)"), nil
	}
	if cmd.Kind == command.KindRelease {
		if c.ExpiredBy != 0 && p.Expiry > c.ExpiredBy {
			return command.Result{}, nil // refreshed since the leader saw it expire
		}
		r.ov.del(keys.ProtectionKey(c.ID))
		return command.Result{Found: true}, nil
	}
	// A refresh. A record already expired as of the proposal may have
	// been ignored by a GC pass: reviving it would protect history that
	// is gone.
	if p.ExpiredAt(cmd.Timestamp.WallTime) {
		return protectionNotFound(c.ID, fmt.Sprintf("expired at %s", time.Unix(0, p.Expiry).UTC().Format(time.RFC3339Nano))), nil
	}
	p.Expiry = max(p.Expiry, c.Expiry)
	r.ov.put(keys.ProtectionKey(c.ID), encodeProtectionRecord(p))
	return command.Result{NodeID: c.ID}, nil
}

// applyProtectCreate creates a protection record, allocating its ID.
// REQUIRES: the replica's raftMu.
func (r *Range) applyProtectCreate(cmd *command.Command) (command.Result, error) {
	c := &cmd.Protect
	if err := command.CheckProtectSpan(c.Start, c.End); err != nil {
		return command.Result{Code: command.CodeMalformed, Message: err.Error()}, nil
	}
	if c.Timestamp.IsZero() || c.Window <= 0 || c.Expiry <= cmd.Timestamp.WallTime {
		return command.Result{Code: command.CodeMalformed,
			Message: fmt.Sprintf("Protect at %s, window %v, expiry %d, proposed at %s", c.Timestamp, time.Duration(c.Window), c.Expiry, cmd.Timestamp)}, nil
	}
	// The bound the GC side relies on: a record created after a GC pass
	// fetched the records protects a timestamp above that pass's target
	// (docs/versions.md, "Protected timestamps").
	floor := hlc.Timestamp{WallTime: cmd.Timestamp.WallTime - c.Window/2}
	if c.Timestamp.Less(floor) {
		return command.Result{Code: command.CodeProtectionTooOld,
			Message: fmt.Sprintf("timestamp %s is older than the proposal's %s minus half the retention window (%v): its history may be collected already",
				c.Timestamp, cmd.Timestamp, time.Duration(c.Window/2))}, nil
	}
	next, err := r.readCounter(protectionIDCounter)
	if err != nil {
		return command.Result{}, err
	}
	id := max(next, 1)
	r.ov.put(keys.CounterKey(protectionIDCounter), encodeCounter(id+1))
	r.ov.put(keys.ProtectionKey(id), encodeProtectionRecord(ProtectionRecord{ID: id, Timestamp: c.Timestamp,
		Start: c.Start, End: c.End, Expiry: c.Expiry, Created: cmd.Timestamp, Description: c.Description}))
	return command.Result{NodeID: id}, nil
}

// ReadProtections returns every protection record in r, a node's copy of
// meta, in ID order, expired ones included. The copy may lag meta's
// leader.
func ReadProtections(r logstore.Reader) ([]ProtectionRecord, error) {
	span := keys.ProtectionSpan()
	it, err := r.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []ProtectionRecord
	for ok := it.First(); ok; ok = it.Next() {
		id, err := keys.DecodeProtectionKey(it.UnsafeKey())
		if err != nil {
			return nil, err
		}
		p, err := decodeProtectionRecord(id, it.UnsafeValue())
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, it.Error()
}
