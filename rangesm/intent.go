package rangesm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// Intents and the lock table (docs/transactions.md, "Several ranges" and
// "Readers and writers that meet an intent").
//
// A transaction across ranges writes, on each range it writes, one
// intent per key: the key's provisional value, held in the range's lock
// table (keys.LockKey: range-local, so snapshots carry it and a split or
// merge moves it with its key), not yet a version. An intent is not read
// as a value by anyone: until it is resolved (TxnResolve: a version at
// the commit timestamp C, or nothing), the key is locked:
//
//   - a read at r < p (the intent's provisional version) ignores it: the
//     transaction commits at C >= p > r, so the read's answer holds;
//   - a read at r >= p cannot tell whether the key has a version <= r
//     until the transaction's fate is known: it fails with an
//     *IntentError naming the intents, and nothing is answered;
//   - a write of the key (any client write, a CAS, a leased put or
//     delete, another transaction's writes) and a transaction read of it
//     validated at commit are refused with CodeIntentConflict.
//
// Writing a version at C below the range's frontier when the intent
// resolves is safe only because of these rules: no read at or above p
// was answered while the intent stood, and no other version of the key
// was written since p.
//
// Reads find intents without a lookup while a range holds none: the
// count of its lock table entries is part of its published state
// (MVCCState.Intents). A read loads that state after its timestamp is
// settled (at or below the published frontier), then the lock table,
// then the data: an intent written later has p above that frontier and
// so above the read, and an intent resolved later left its version in
// the engine before the read's data lookup.
//
//	intent := 0x01 txn_id:16 bytes flags:u8 provisional:timestamp
//	          record:bytes value:bytes
//	flags  := bit 0 delete (value empty)
//	bytes  := len:uvarint byte{len}; timestamp := hlc.Encode (12 bytes)

const intentVersion byte = 0x01

const intentDelete byte = 1 << 0

// Intent is one key's entry in a range's lock table.
type Intent struct {
	// Key is the user key locked.
	Key []byte
	// Txn is the transaction holding it; Record the key of its record.
	Txn    command.TxnID
	Record []byte
	// Provisional is p: the intent becomes a version at the commit
	// timestamp C >= p.
	Provisional hlc.Timestamp
	// Delete: the transaction deletes the key; Value is its new value
	// otherwise.
	Delete bool
	Value  []byte
}

func encodeIntent(in *Intent) []byte {
	b := make([]byte, 0, 1+command.TxnIDLen+1+hlc.EncodedLen+2*binary.MaxVarintLen32+len(in.Record)+len(in.Value))
	b = append(b, intentVersion)
	b = append(b, in.Txn[:]...)
	var flags byte
	if in.Delete {
		flags |= intentDelete
	}
	b = append(b, flags)
	b = in.Provisional.AppendEncode(b)
	b = binary.AppendUvarint(b, uint64(len(in.Record)))
	b = append(b, in.Record...)
	b = binary.AppendUvarint(b, uint64(len(in.Value)))
	return append(b, in.Value...)
}

// decodeIntent decodes the value of key's lock table entry; the intent's
// slices are copies.
func decodeIntent(key, v []byte) (Intent, error) {
	bad := func(what string) (Intent, error) {
		return Intent{}, fmt.Errorf("intent on %q: %s (%d bytes)", key, what, len(v))
	}
	const fixed = 1 + command.TxnIDLen + 1 + hlc.EncodedLen
	if len(v) < fixed || v[0] != intentVersion {
		return bad("bad header")
	}
	in := Intent{Key: append([]byte{}, key...)}
	copy(in.Txn[:], v[1:])
	flags := v[1+command.TxnIDLen]
	if flags&^intentDelete != 0 {
		return bad(fmt.Sprintf("unknown flags %#x", flags))
	}
	in.Delete = flags&intentDelete != 0
	p, err := hlc.Decode(v[2+command.TxnIDLen : fixed])
	if err != nil {
		return bad(err.Error())
	}
	in.Provisional = p
	rest := v[fixed:]
	var ok bool
	if in.Record, ok = takeField(&rest); !ok {
		return bad("bad record key")
	}
	if in.Value, ok = takeField(&rest); !ok || len(rest) != 0 {
		return bad("bad value")
	}
	return in, nil
}

// IntentError is the answer to a read at r that met intents at or below
// r: what the read would return depends on transactions not yet
// resolved, so it returns nothing.
type IntentError struct {
	RangeID uint64
	// ReadTimestamp is the read's.
	ReadTimestamp hlc.Timestamp
	// Intents met, in key order (at most maxIntentsReported).
	Intents []Intent
}

// maxIntentsReported bounds the intents an IntentError carries.
const maxIntentsReported = 64

func (e *IntentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "range %d: read at %s met %d intent(s):", e.RangeID, e.ReadTimestamp, len(e.Intents))
	for i, in := range e.Intents {
		if i == 3 {
			b.WriteString(" ...")
			break
		}
		fmt.Fprintf(&b, " %q (transaction %s at %s)", in.Key, in.Txn, in.Provisional)
	}
	return b.String()
}

// ErrIntent matches every *IntentError (errors.Is).
var ErrIntent = errors.New("rangesm: read met an intent")

func (e *IntentError) Is(target error) bool { return target == ErrIntent }

// Locks says where a read of one range finds its intents.
type Locks struct {
	RangeID uint64
	// Held is false when the range held no intent as of the published
	// state the read goes by (MVCCState.Intents == 0): nothing to look up.
	Held bool
}

// LocksOf returns the Locks of range rangeID as of its published state
// st.
func LocksOf(rangeID uint64, st MVCCState) Locks {
	return Locks{RangeID: rangeID, Held: st.Intents > 0}
}

// lockedKey returns the intent on k in l's lock table, if any.
func (r Reader) lockedKey(l Locks, k []byte) (Intent, bool, error) {
	v, err := r.db.Get(keys.LockKey(l.RangeID, k))
	if errors.Is(err, storage.ErrNotFound) {
		return Intent{}, false, nil
	}
	if err != nil {
		return Intent{}, false, err
	}
	in, err := decodeIntent(k, v)
	return in, err == nil, err
}

// intentsMet returns the intents at or below ts on the keys ks.
func (r Reader) intentsMet(l Locks, ks [][]byte, ts hlc.Timestamp) ([]Intent, error) {
	if !l.Held {
		return nil, nil
	}
	var met []Intent
	for _, k := range ks {
		in, ok, err := r.lockedKey(l, k)
		if err != nil {
			return nil, err
		}
		if ok && in.Provisional.LessEq(ts) && len(met) < maxIntentsReported {
			met = append(met, in)
		}
	}
	return met, nil
}

// intentsIn returns the intents at or below ts on the user keys [start,
// end) of l's range (an empty end: to the end of the key space).
func (r Reader) intentsIn(l Locks, start, end []byte, ts hlc.Timestamp) ([]Intent, error) {
	if !l.Held {
		return nil, nil
	}
	return scanIntents(r.db, l.RangeID, start, end, func(in *Intent) bool { return in.Provisional.LessEq(ts) })
}

// ReadIntent returns the intent on user key k in range rangeID's lock
// table as this node has applied it.
func ReadIntent(db *storage.DB, rangeID uint64, k []byte) (Intent, bool, error) {
	return Reader{db: db}.lockedKey(Locks{RangeID: rangeID, Held: true}, k)
}

// TxnIntentsGone reports whether, in one consistent view of this node's
// engine, range rangeID is here and not frozen for a merge, its
// descriptor holds every key of ks, and none of them holds an intent of
// transaction txn. That view is a prefix of the range's log: if it shows
// the range owning the keys and no intent of txn on them, every intent
// of txn on them applied at or before that point (in this range, or in
// one it came from by a split or merge) was resolved by then.
//
// The view is what makes the answer safe. Read key by key from the
// engine and checked against the replica's descriptor in memory, it is
// not: the lock table and the descriptor change at different moments.
// A split moves the right-hand half's intents to the new range's lock
// table in the engine before replication publishes the shorter
// descriptor (an apply batch written early, to read the engine, writes
// the split's move with it), and a merge deletes the right-hand range's
// lock table while that replica's descriptor in memory still covers its
// keys; in either window a lookup under rangeID misses an intent that
// still stands under the other range's ID.
func TxnIntentsGone(db *storage.DB, rangeID uint64, txn command.TxnID, ks [][]byte) (bool, error) {
	snap, err := db.NewSnapshot()
	if err != nil {
		return false, err
	}
	defer snap.Close()
	desc, frozen, err := rangeView(snap, rangeID)
	if err != nil || desc == nil || frozen {
		// Merged away, removed or not initialized; or frozen, its
		// intents about to move to the left-hand range.
		return false, err
	}
	for _, k := range ks {
		if !keys.ContainsUserKey(desc, k) {
			return false, nil
		}
		v, err := snap.Get(keys.LockKey(rangeID, k))
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		in, err := decodeIntent(k, v)
		if err != nil || in.Txn == txn {
			return false, err
		}
	}
	return true, nil
}

// rangeView reads range rangeID's descriptor and whether it is frozen
// for a merge from snap. desc is nil when snap holds no descriptor of
// the range: it merged away (the merge's batch deletes the right-hand
// range's range-local keys, its descriptor among them, in the batch that
// moves its intents and records), was removed, or is not initialized.
func rangeView(snap *storage.Snapshot, rangeID uint64) (desc *kvpb.RangeDescriptor, frozen bool, err error) {
	v, err := snap.Get(keys.DescriptorKey(rangeID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if desc, err = logstore.DecodeDescriptor(v); err != nil {
		return nil, false, fmt.Errorf("range %d: %w", rangeID, err)
	}
	if _, err := snap.Get(keys.FreezeKey(rangeID)); err == nil {
		frozen = true
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, false, err
	}
	return desc, frozen, nil
}

// scanIntents returns the intents of range rangeID on [start, end) that
// keep accepts, in key order.
func scanIntents(db *storage.DB, rangeID uint64, start, end []byte, keep func(*Intent) bool) ([]Intent, error) {
	sp := keys.LockSpan(rangeID, start, end)
	it, err := db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Intent
	for ok := it.First(); ok; ok = it.Next() {
		k, err := keys.DecodeLockKey(it.UnsafeKey())
		if err != nil {
			return nil, err
		}
		in, err := decodeIntent(k, it.UnsafeValue())
		if err != nil {
			return nil, err
		}
		if keep == nil || keep(&in) {
			out = append(out, in)
		}
	}
	return out, it.Error()
}

// IntentsBelow returns at most limit of range rangeID's intents, as this
// node has applied them, whose provisional version is below ts, in key
// order.
func IntentsBelow(db *storage.DB, rangeID uint64, ts hlc.Timestamp, limit int) ([]Intent, error) {
	n := 0
	return scanIntents(db, rangeID, nil, nil, func(in *Intent) bool {
		if n >= limit || !in.Provisional.Less(ts) {
			return false
		}
		n++
		return true
	})
}

// countIntents returns the number of range rangeID's lock table entries.
func countIntents(db *storage.DB, rangeID uint64) (int, error) {
	return countSpan(db, keys.LockSpan(rangeID, nil, nil))
}

// The apply side.

// intentOn returns the intent on k as applied so far (the batch being
// applied included).
// REQUIRES: the replica's raftMu.
func (r *Range) intentOn(k []byte) (Intent, bool, error) {
	if r.intents == 0 {
		return Intent{}, false, nil
	}
	v, found, err := r.ov.get(keys.LockKey(r.rangeID, k))
	if err != nil || !found {
		return Intent{}, false, err
	}
	in, err := decodeIntent(k, v)
	if err != nil {
		return Intent{}, false, fmt.Errorf("range %d: %w", r.rangeID, err)
	}
	return in, true, nil
}

// feedFrontier is the frontier change feeds may report: the range's, or
// just below its lowest intent (feed.go). It reads the lock table, in the
// engine: the caller publishes after the batch was written.
// REQUIRES: the replica's raftMu.
func (r *Range) feedFrontier() hlc.Timestamp {
	f := r.st.frontier
	if r.intents == 0 {
		return f
	}
	ins, err := scanIntents(r.db, r.rangeID, nil, nil, nil)
	if err != nil {
		// Hold the feed where it is rather than risk passing an intent.
		if p := r.published.Load(); p != nil {
			return p.FeedFrontier
		}
		return hlc.Timestamp{}
	}
	for _, in := range ins {
		if in.Provisional.LessEq(f) {
			f = in.Provisional.Prev()
		}
	}
	return f
}

// conflict is the rejection of a command that met in.
func conflict(in *Intent, what string) command.Result {
	return command.Result{Code: command.CodeIntentConflict, Value: append([]byte{}, in.Key...),
		Message: fmt.Sprintf("%s %q: it holds an intent of transaction %s at %s", what, in.Key, in.Txn, in.Provisional)}
}

// keyConflict returns the rejection of a command that writes (or, in a
// transaction, read) k while another transaction than own holds an
// intent on it; ok is true when there is none. own is nil for a command
// that is no transaction's.
// REQUIRES: the replica's raftMu.
func (r *Range) keyConflict(k []byte, own *command.TxnID, what string) (command.Result, bool, error) {
	in, found, err := r.intentOn(k)
	if err != nil || !found || (own != nil && in.Txn == *own) {
		return command.Result{}, true, err
	}
	return conflict(&in, what), false, nil
}

// spanConflict is keyConflict for the keys [start, end) (an empty end:
// to the end of the key space). It writes the apply batch first when the
// range holds intents (the lock table is then read from the engine).
// REQUIRES: the replica's raftMu.
func (r *Range) spanConflict(start, end []byte, own *command.TxnID, what string) (command.Result, bool, error) {
	if r.intents == 0 {
		return command.Result{}, true, nil
	}
	if err := r.flush(); err != nil {
		return command.Result{}, false, err
	}
	found, err := scanIntents(r.db, r.rangeID, start, end, func(in *Intent) bool { return own == nil || in.Txn != *own })
	if err != nil || len(found) == 0 {
		return command.Result{}, err == nil, err
	}
	return conflict(&found[0], what), false, nil
}

// mutationsConflict checks every key cmd's mutations write.
// REQUIRES: the replica's raftMu.
func (r *Range) mutationsConflict(muts []command.Mutation, own *command.TxnID) (command.Result, bool, error) {
	if r.intents == 0 {
		return command.Result{}, true, nil
	}
	for i := range muts {
		m := &muts[i]
		var res command.Result
		ok, err := true, error(nil)
		if m.Kind == command.KindDeleteRange {
			res, ok, err = r.spanConflict(m.Key, m.Value, own, "the span starting at")
		} else {
			res, ok, err = r.keyConflict(m.Key, own, "cannot write")
		}
		if err != nil || !ok {
			return res, ok, err
		}
	}
	return command.Result{}, true, nil
}

// readsConflict checks every key and span a transaction read.
// REQUIRES: the replica's raftMu.
func (r *Range) readsConflict(reads []command.TxnRead, own *command.TxnID) (command.Result, bool, error) {
	if r.intents == 0 {
		return command.Result{}, true, nil
	}
	for _, rd := range reads {
		var res command.Result
		ok, err := true, error(nil)
		if rd.Span {
			res, ok, err = r.spanConflict(rd.Key, rd.End, own, "the transaction read a span holding")
		} else {
			res, ok, err = r.keyConflict(rd.Key, own, "the transaction read")
		}
		if err != nil || !ok {
			return res, ok, err
		}
	}
	return command.Result{}, true, nil
}

// putIntent stages in as k's lock table entry, counting it if k had none.
// REQUIRES: the replica's raftMu.
func (r *Range) putIntent(in *Intent) error {
	_, had, err := r.intentOn(in.Key)
	if err != nil {
		return err
	}
	r.ov.put(keys.LockKey(r.rangeID, in.Key), encodeIntent(in))
	if !had {
		r.intents++
	}
	return nil
}

// dropIntent stages the removal of k's lock table entry.
// REQUIRES: the replica's raftMu, and an entry on k.
func (r *Range) dropIntent(k []byte) {
	r.ov.del(keys.LockKey(r.rangeID, k))
	r.intents--
}

// applyTxnWrite writes a transaction's intents on this range
// (docs/transactions.md, "Several ranges", step 1): its reads are
// validated as a TxnCommit's are, every key it read or writes must be
// free of other transactions' intents, and then each written key gets an
// intent at p = max(T, F.Next()), the frontier rises to p, and the answer
// carries p (Result.Version). A transaction's own intent on a key is
// replaced (a retried write). With TxnWrite.Stage the same command
// stages the record (the range must hold its key), and writes nothing
// unless the record is then STAGING at the bound asked for.
//
// TxnWrite.Resolve, resolutions of committed transactions' intents on
// this range, apply first, as a TxnResolve each (or, one with a Record,
// as that record's TxnCommitRecord with its keys: the COMMITTED carried
// by the write), whether or not the write
// then writes (the one exception to "a rejected command changed
// nothing": they are idempotent, so a retry applying them again is
// harmless); Result.Found says they all applied (a carried COMMITTED:
// the record is COMMITTED after it). TxnWrite.DeleteRecords are deleted
// then, as a TxnDelete naming them deletes them. One with a key outside
// the range (a split since the proposal) is skipped, as is any that a
// TxnResolve would refuse.
// REQUIRES: the replica's raftMu.
func (r *Range) applyTxnWrite(cmd *command.Command) (command.Result, error) {
	if len(cmd.Mutations) == 0 && len(cmd.Txn.Reads) == 0 {
		return command.Result{Code: command.CodeMalformed, Message: "a TxnWrite without writes or reads"}, nil
	}
	folded, err := r.applyFoldedResolves(cmd.TxnWrite.Resolve)
	if err != nil {
		return command.Result{}, err
	}
	if len(cmd.TxnWrite.DeleteRecords) > 0 {
		if err := r.deleteFinishedRecords(cmd.TxnWrite.DeleteRecords); err != nil {
			return command.Result{}, err
		}
	}
	res, err := r.applyTxnWriteOwn(cmd)
	if err == nil && res.Code == command.CodeOK {
		res.Found = folded
	}
	return res, err
}

// applyFoldedResolves applies a TxnWrite's folded resolutions and
// reports whether all of them applied (true when there are none).
// REQUIRES: the replica's raftMu.
func (r *Range) applyFoldedResolves(rs []command.TxnResolve) (bool, error) {
	all := true
	for i := range rs {
		t := &rs[i]
		if !t.Committed {
			all = false
			continue
		}
		in := true
		for _, k := range t.Keys {
			if !keys.ContainsUserKey(r.desc, k) {
				in = false
				break
			}
		}
		if !in {
			all = false
			continue
		}
		if len(t.Record) > 0 {
			// The transaction's COMMITTED, carried: the record marked
			// COMMITTED and this range's intents resolved in one step,
			// as a TxnCommitRecord with keys does (never an intent
			// resolved while the record is STAGING).
			res, err := r.applyTxnRecord(&command.Command{Kind: command.KindTxnRecord, TxnRecord: command.TxnRecordCmd{
				ID: t.ID, Op: command.TxnCommitRecord, RecordKey: t.Record, Timestamp: t.CommitTimestamp, Keys: t.Keys}})
			if err != nil {
				return false, err
			}
			if res.Code != command.CodeOK || TxnStatus(res.NodeID) != TxnCommitted {
				all = false
			}
			continue
		}
		res, err := r.applyTxnResolve(&command.Command{Kind: command.KindTxnResolve, TxnResolve: *t})
		if err != nil {
			return false, err
		}
		if res.Code != command.CodeOK {
			all = false
		}
	}
	return all, nil
}

// applyTxnWriteOwn is applyTxnWrite once the folded resolutions applied.
// REQUIRES: the replica's raftMu.
func (r *Range) applyTxnWriteOwn(cmd *command.Command) (command.Result, error) {
	own := &cmd.TxnWrite.ID
	if res, ok := r.checkTxnKeys(cmd); !ok {
		return res, nil
	}
	if res, ok, err := r.readsConflict(cmd.Txn.Reads, own); err != nil || !ok {
		return res, err
	}
	if res, ok, err := r.mutationsConflict(cmd.Mutations, own); err != nil || !ok {
		return res, err
	}
	if len(cmd.Txn.Reads) > 0 && !skipTxnReadValidation() {
		if res, ok, err := r.validateTxnReads(&cmd.Txn); err != nil || !ok {
			return res, err
		}
	}
	p, ok := r.nextVersion(cmd.Timestamp)
	if !ok {
		return frontierAtMax(), nil
	}
	if t := &cmd.TxnWrite; t.Stage {
		// The record's stage, folded in: the record range's intents and
		// the record go in together, or neither does.
		res, err := r.applyTxnRecord(&command.Command{Kind: command.KindTxnRecord, TxnRecord: command.TxnRecordCmd{
			ID: t.ID, Op: command.TxnStage, RecordKey: t.Record, Timestamp: t.StageBound, Heartbeat: t.Heartbeat, Keys: t.StageKeys}})
		if err != nil || res.Code != command.CodeOK {
			return res, err
		}
		if st := TxnStatus(res.NodeID); st != TxnStaging || res.Version != t.StageBound {
			return command.Result{Code: command.CodeReadChanged, Value: append([]byte{}, t.Record...),
				Message: fmt.Sprintf("its record was %v at %s when it staged at %s (pushed by a reader that took its coordinator for gone)", st, res.Version, t.StageBound)}, nil
		}
	}
	for i := range cmd.Mutations {
		m := &cmd.Mutations[i]
		in := Intent{Key: m.Key, Txn: *own, Record: cmd.TxnWrite.Record, Provisional: p,
			Delete: m.Kind == command.KindDelete, Value: m.Value}
		if in.Delete {
			in.Value = nil
		}
		if err := r.putIntent(&in); err != nil {
			return command.Result{}, err
		}
	}
	r.advance(p)
	return command.Result{Version: p}, nil
}

// applyTxnResolve resolves a finished transaction's intents on the keys
// it names: committed at C, each becomes a version at C (C >= p, checked:
// a resolution below an intent's p is refused whole, changing nothing)
// and the frontier rises to C; aborted, each is dropped. Keys without an
// intent of the transaction are skipped, so a resolution may be sent
// again.
// REQUIRES: the replica's raftMu.
func (r *Range) applyTxnResolve(cmd *command.Command) (command.Result, error) {
	t := &cmd.TxnResolve
	var mine []Intent
	seen := make(map[string]bool, len(t.Keys))
	for _, k := range t.Keys {
		if !keys.ContainsUserKey(r.desc, k) {
			return outOfRange(r.desc, k), nil
		}
		if seen[string(k)] {
			continue // named twice: resolved once
		}
		seen[string(k)] = true
		in, found, err := r.intentOn(k)
		if err != nil {
			return command.Result{}, err
		}
		if !found || in.Txn != t.ID {
			continue
		}
		if t.Committed && t.CommitTimestamp.Less(in.Provisional) {
			return command.Result{Code: command.CodeMalformed,
				Message: fmt.Sprintf("transaction %s resolved at %s, below its intent on %q at %s", t.ID, t.CommitTimestamp, k, in.Provisional)}, nil
		}
		mine = append(mine, in)
	}
	if len(mine) == 0 {
		return command.Result{}, nil
	}
	if t.Committed && r.st.frontier == hlc.MaxTimestamp {
		return frontierAtMax(), nil
	}
	w := r.writer()
	for i := range mine {
		in := &mine[i]
		if t.Committed {
			var err error
			if in.Delete {
				_, err = w.Delete(in.Key, t.CommitTimestamp)
			} else {
				err = w.Put(in.Key, t.CommitTimestamp, in.Value)
			}
			if err != nil {
				// The intent kept every other write of the key out since
				// p <= C: a newer version contradicts the log.
				return command.Result{}, fmt.Errorf("TxnResolve of %q at %s: %w", in.Key, t.CommitTimestamp, err)
			}
		}
		r.dropIntent(in.Key)
	}
	if t.Committed {
		r.advance(t.CommitTimestamp)
	}
	return command.Result{Version: t.CommitTimestamp, NodeID: uint64(len(mine))}, nil
}

// moveIntents stages the move of the intents on the user keys [start,
// end) out of this range's lock table: into range to's when copy is set
// (a split whose right-hand replica this node creates), nowhere otherwise
// (the right-hand range's replica here has its own state).
// REQUIRES: the replica's raftMu, and the apply batch flushed.
func (r *Range) moveIntents(start, end []byte, to uint64, copy bool) error {
	if r.intents == 0 {
		return nil
	}
	var n int
	var err error
	if copy {
		n, err = copyIntents(&r.ov, r.rangeID, to, start, end)
	} else {
		n, err = countSpan(r.db, keys.LockSpan(r.rangeID, start, end))
	}
	if err != nil {
		return err
	}
	sp := keys.LockSpan(r.rangeID, start, end)
	r.ov.delRange(sp.Start, sp.End)
	r.intents -= n
	return nil
}

// copyIntents stages a copy of range from's lock table entries on the
// user keys [start, end) into range to's, and returns how many there
// were. It reads the engine: the caller flushed the apply batch.
func copyIntents(a *overlay, from, to uint64, start, end []byte) (int, error) {
	sp := keys.LockSpan(from, start, end)
	it, err := a.db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k, err := keys.DecodeLockKey(it.UnsafeKey())
		if err != nil {
			return 0, err
		}
		a.put(keys.LockKey(to, k), it.Value())
		n++
	}
	return n, it.Error()
}

// countSpan returns the number of engine keys in sp.
func countSpan(db *storage.DB, sp keys.Span) (int, error) {
	it, err := db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// checkTxnKeys rejects a transaction command whose reads or writes are
// outside the range.
// REQUIRES: the replica's raftMu.
func (r *Range) checkTxnKeys(cmd *command.Command) (command.Result, bool) {
	desc := r.desc
	for i := range cmd.Mutations {
		if res, ok := checkMutationInRange(desc, &cmd.Mutations[i]); !ok {
			return res, false
		}
	}
	for _, rd := range cmd.Txn.Reads {
		if rd.Span {
			if !keys.ContainsUserSpan(desc, rd.Key, rd.End) {
				return command.Result{Code: command.CodeKeyOutOfRange,
					Message: fmt.Sprintf("read span [%q, %q) is not inside range %d [%q, %q)", rd.Key, rd.End, desc.GetRangeId(), desc.GetStartKey(), desc.GetEndKey())}, false
			}
		} else if !keys.ContainsUserKey(desc, rd.Key) {
			return outOfRange(desc, rd.Key), false
		}
	}
	return command.Result{}, true
}

// takeField cuts a field (its length as a uvarint, then its bytes) off the
// front of *rest and returns a copy of it; false if *rest is too short.
func takeField(rest *[]byte) ([]byte, bool) {
	n, m := binary.Uvarint(*rest)
	if m <= 0 || n > uint64(len(*rest)-m) {
		return nil, false
	}
	f := append([]byte{}, (*rest)[m:m+int(n)]...)
	*rest = (*rest)[m+int(n):]
	return f, true
}
