package rangesm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// Leases as applied (docs/leases.md). The meta range holds one record per
// lease and one attachment key per key a put attached to it; user ranges
// apply leased puts (refused past their attach window) and the
// conditional deletes that end a lease. Expiry is not decided here: the
// meta leader's lessor (node/lessor.go) decides it by its clock and
// proposes a revoke; everything below depends only on the log.
//
//	lease record := 0x01 ttl_ms:uvarint state:u8 last_attach:timestamp
//	state        := 0x01 live | 0x02 revoked | 0x03 expired
//
// last_attach is the highest proposal timestamp of an attach the lease
// accepted: no put attached to it can apply above last_attach + the
// attach window, which is what the sweep waits for.

const leaseRecordVersion = 0x01

const (
	leaseLive    = 0x01
	leaseRevoked = 0x02
	leaseExpired = 0x03
)

// leaseIDCounter names the meta counter that allocates lease IDs.
const leaseIDCounter = "lease-id"

// LeaseRecord is a lease as meta holds it.
type LeaseRecord struct {
	ID        uint64
	TTLMillis uint64
	// Ended is set once the lease was revoked or expired: it takes no
	// attaches and its keys are being deleted (the sweep), after which
	// the record goes.
	Ended bool
	// Expired says the end was an expiry (else a client's revoke).
	Expired bool
	// LastAttach is the proposal timestamp of the latest attach.
	LastAttach hlc.Timestamp
}

func encodeLeaseRecord(l LeaseRecord) []byte {
	b := []byte{leaseRecordVersion}
	b = binary.AppendUvarint(b, l.TTLMillis)
	state := byte(leaseLive)
	switch {
	case l.Ended && l.Expired:
		state = leaseExpired
	case l.Ended:
		state = leaseRevoked
	}
	b = append(b, state)
	return l.LastAttach.AppendEncode(b)
}

func decodeLeaseRecord(id uint64, b []byte) (LeaseRecord, error) {
	l := LeaseRecord{ID: id}
	if len(b) < 1 || b[0] != leaseRecordVersion {
		return l, fmt.Errorf("lease %d: record of unknown version", id)
	}
	ttl, n := binary.Uvarint(b[1:])
	if n <= 0 || len(b) != 1+n+1+hlc.EncodedLen {
		return l, fmt.Errorf("lease %d: malformed record (%d bytes)", id, len(b))
	}
	l.TTLMillis = ttl
	switch b[1+n] {
	case leaseLive:
	case leaseRevoked:
		l.Ended = true
	case leaseExpired:
		l.Ended, l.Expired = true, true
	default:
		return l, fmt.Errorf("lease %d: unknown state %#x", id, b[1+n])
	}
	ts, err := hlc.Decode(b[2+n:])
	if err != nil {
		return l, fmt.Errorf("lease %d: last attach: %w", id, err)
	}
	l.LastAttach = ts
	return l, nil
}

// readLease reads lease id's record through the overlay.
func (r *Range) readLease(id uint64) (LeaseRecord, bool, error) {
	v, found, err := r.ov.get(keys.LeaseKey(id))
	if err != nil || !found {
		return LeaseRecord{}, false, err
	}
	l, err := decodeLeaseRecord(id, v)
	return l, err == nil, err
}

func leaseNotFound(id uint64, why string) command.Result {
	return command.Result{Code: command.CodeLeaseNotFound, Message: fmt.Sprintf("lease %d %s", id, why)}
}

// applyLease applies the meta lease commands.
// REQUIRES: the replica's raftMu.
func (r *Range) applyLease(cmd *command.Command) (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	c := &cmd.Lease
	if cmd.Kind == command.KindLeaseGrant {
		return r.applyLeaseGrant(cmd)
	}
	l, found, err := r.readLease(c.ID)
	if err != nil {
		return command.Result{}, err
	}
	if !found {
		return leaseNotFound(c.ID, "not found (never granted, or ended)"), nil
	}
	switch cmd.Kind {
	case command.KindLeaseRevoke:
		if l.Ended {
			return leaseNotFound(c.ID, "already ended"), nil
		}
		if c.Term != 0 && c.Term != r.applyingTerm {
			// Decided from deadlines of another term than the one that
			// appended it: a leader since may have acknowledged
			// keep-alives (node/lease_lessor.go).
			return command.Result{Code: command.CodeLeaseStaleExpiry,
				Message: fmt.Sprintf("expiry of lease %d decided in term %d, appended in term %d", c.ID, c.Term, r.applyingTerm)}, nil
		}
		l.Ended, l.Expired = true, c.Expired
		r.ov.put(keys.LeaseKey(c.ID), encodeLeaseRecord(l))
		return command.Result{}, nil
	case command.KindLeaseAttach:
		if l.Ended {
			return leaseNotFound(c.ID, "has ended (expired or revoked)"), nil
		}
		if len(c.Key) == 0 {
			return command.Result{Code: command.CodeMalformed, Message: "attach of an empty key"}, nil
		}
		l.LastAttach = l.LastAttach.Forward(cmd.Timestamp)
		r.ov.put(keys.LeaseKey(c.ID), encodeLeaseRecord(l))
		r.ov.put(keys.AttachmentKey(c.ID, c.Key), nil)
		return command.Result{}, nil
	case command.KindLeaseSwept:
		if !l.Ended {
			return command.Result{Code: command.CodeMalformed, Message: fmt.Sprintf("lease %d swept while live", c.ID)}, nil
		}
		// The attachments are read from the engine: write what the
		// entries before this one staged first.
		if err := r.flush(); err != nil {
			return command.Result{}, err
		}
		atts, err := LeaseAttachments(r.db, c.ID, 0)
		if err != nil {
			return command.Result{}, err
		}
		for _, k := range atts {
			r.ov.del(keys.AttachmentKey(c.ID, k))
		}
		r.ov.del(keys.LeaseKey(c.ID))
		return command.Result{NodeID: uint64(len(atts))}, nil
	}
	return command.Result{Code: command.CodeMalformed, Message: fmt.Sprintf("unknown lease kind %v", cmd.Kind)}, nil
}

// applyLeaseGrant creates a lease record, allocating its ID when the
// command names none; the result's NodeID is the ID.
// REQUIRES: the replica's raftMu.
func (r *Range) applyLeaseGrant(cmd *command.Command) (command.Result, error) {
	c := &cmd.Lease
	next, err := r.readCounter(leaseIDCounter)
	if err != nil {
		return command.Result{}, err
	}
	next = max(next, 1)
	id := c.ID
	if id == 0 {
		id = next
	} else if _, found, err := r.readLease(id); err != nil {
		return command.Result{}, err
	} else if found {
		return command.Result{Code: command.CodeLeaseExists, Message: fmt.Sprintf("lease %d exists", id)}, nil
	}
	if id >= next && id != ^uint64(0) {
		r.ov.put(keys.CounterKey(leaseIDCounter), encodeCounter(id+1))
	}
	r.ov.put(keys.LeaseKey(id), encodeLeaseRecord(LeaseRecord{ID: id, TTLMillis: c.TTLMillis}))
	return command.Result{NodeID: id}, nil
}

// applyLeasePut writes a key attached to a lease, unless it would apply
// above the put's attach window: past it, the lease may have ended and
// its sweep passed this range (docs/leases.md, "Attach").
// REQUIRES: the replica's raftMu.
func (r *Range) applyLeasePut(cmd *command.Command) (command.Result, error) {
	m := &cmd.Mutations[0]
	if res, ok := checkMutationInRange(r.desc, m); !ok {
		return res, nil
	}
	v, ok := r.nextVersion(cmd.Timestamp)
	if !ok {
		return frontierAtMax(), nil
	}
	if res, ok, err := r.keyConflict(m.Key, nil, "cannot write"); err != nil || !ok {
		return res, err
	}
	if cmd.Lease.Deadline.Less(v) {
		return command.Result{Code: command.CodeLeaseWindowPassed,
			Message: fmt.Sprintf("put of %q attached to lease %d would apply at %s, past its attach window (%s)", m.Key, cmd.Lease.ID, v, cmd.Lease.Deadline)}, nil
	}
	if err := r.writer().PutLeased(m.Key, v, m.Value, cmd.Lease.ID); err != nil {
		return command.Result{}, fmt.Errorf("LeasePut at %s: %w", v, err)
	}
	r.advance(v)
	return command.Result{Version: v}, nil
}

// applyLeaseBatch applies a batch holding puts attached to leases: all
// its mutations at one version, in order, unless that version is above
// any leased put's attach window, when it writes nothing (as
// applyLeasePut).
// REQUIRES: the replica's raftMu.
func (r *Range) applyLeaseBatch(cmd *command.Command) (command.Result, error) {
	for i := range cmd.Mutations {
		if res, ok := checkMutationInRange(r.desc, &cmd.Mutations[i]); !ok {
			return res, nil
		}
	}
	if res, ok, err := r.mutationsConflict(cmd.Mutations, nil); err != nil || !ok {
		return res, err
	}
	v, ok := r.nextVersion(cmd.Timestamp)
	if !ok {
		return frontierAtMax(), nil
	}
	for i := range cmd.Mutations {
		if m := &cmd.Mutations[i]; m.Kind == command.KindLeasePut && m.Deadline.Less(v) {
			return command.Result{Code: command.CodeLeaseWindowPassed,
				Message: fmt.Sprintf("batch put of %q attached to lease %d would apply at %s, past its attach window (%s)", m.Key, m.Lease, v, m.Deadline)}, nil
		}
	}
	w := r.writer()
	for i := range cmd.Mutations {
		m := &cmd.Mutations[i]
		var err error
		switch m.Kind {
		case command.KindPut:
			err = w.Put(m.Key, v, m.Value)
		case command.KindLeasePut:
			err = w.PutLeased(m.Key, v, m.Value, m.Lease)
		case command.KindDelete:
			_, err = w.Delete(m.Key, v)
		case command.KindDeleteRange:
			var end []byte
			if len(m.Value) > 0 {
				end = m.Value
			}
			_, err = w.DeleteRange(m.Key, end, v)
		}
		if err != nil {
			return command.Result{}, fmt.Errorf("LeaseBatch at %s: %w", v, err)
		}
	}
	r.advance(v)
	return command.Result{Version: v}, nil
}

// applyLeaseDelete deletes each key whose newest version is still
// attached to the lease. The frontier rises to the command's version
// even when nothing is deleted: a leased put that applies after this one
// is then above the lease's last attach window and refused.
// REQUIRES: the replica's raftMu.
func (r *Range) applyLeaseDelete(cmd *command.Command) (command.Result, error) {
	for _, k := range cmd.Lease.Keys {
		if !keys.ContainsUserKey(r.desc, k) {
			return outOfRange(r.desc, k), nil
		}
	}
	for _, k := range cmd.Lease.Keys {
		if res, ok, err := r.keyConflict(k, nil, "cannot delete"); err != nil || !ok {
			return res, err
		}
	}
	v, ok := r.nextVersion(cmd.Timestamp)
	if !ok {
		return frontierAtMax(), nil
	}
	w := r.writer()
	var n uint64
	for _, k := range cmd.Lease.Keys {
		deleted, err := w.DeleteIfLeased(k, v, cmd.Lease.ID)
		if err != nil {
			return command.Result{}, fmt.Errorf("LeaseDelete at %s: %w", v, err)
		}
		if deleted {
			n++
		}
	}
	r.advance(v)
	return command.Result{Version: v, NodeID: n}, nil
}

// ReadLeases returns every lease record in r, a node's copy of meta, in ID
// order. The copy may lag meta's leader.
func ReadLeases(r logstore.Reader) ([]LeaseRecord, error) {
	span := keys.LeaseSpan()
	it, err := r.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []LeaseRecord
	for ok := it.First(); ok; ok = it.Next() {
		id, err := keys.DecodeLeaseKey(it.UnsafeKey())
		if err != nil {
			return nil, err
		}
		l, err := decodeLeaseRecord(id, it.UnsafeValue())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, it.Error()
}

// ReadLease returns lease id's record in r, a node's copy of meta.
func ReadLease(r logstore.Reader, id uint64) (LeaseRecord, bool, error) {
	v, err := r.Get(keys.LeaseKey(id))
	if errors.Is(err, storage.ErrNotFound) {
		return LeaseRecord{}, false, nil
	}
	if err != nil {
		return LeaseRecord{}, false, err
	}
	l, err := decodeLeaseRecord(id, v)
	return l, err == nil, err
}

// LeaseAttachments returns the user keys attached to lease id in r, a
// node's copy of meta, in key order: at most limit of them (0: all).
func LeaseAttachments(r logstore.Reader, id uint64, limit int) ([][]byte, error) {
	span := keys.AttachmentSpan(id)
	it, err := r.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out [][]byte
	for ok := it.First(); ok && (limit <= 0 || len(out) < limit); ok = it.Next() {
		_, k, err := keys.DecodeAttachmentKey(it.UnsafeKey())
		if err != nil {
			return nil, err
		}
		out = append(out, append([]byte(nil), k...))
	}
	return out, it.Error()
}
