// Package logstore is the Raft log and Raft state of one replica, kept in
// the node's engine: it implements raft.Storage for the replica's RawNode.
//
// Layout (raft/keys, docs/formats.md): the log entries, the HardState, the
// truncated state and the replica ID are node-local keys under
// 0x00 'r' <range_id>; they never leave the node. The applied state, the
// ConfState and the descriptor are range-local keys under 0x01 'r'
// <range_id>; they are replicated state and travel in snapshots.
//
// Writes are staged, not performed: the node's log writer stages the log
// writes of every range into ONE engine batch, writes it with one fsync,
// and only then tells each Store that its staged writes are durable (the
// Commit... methods). Until then, Raft keeps the new entries in its own
// unstable log and does not ask Storage for them.
//
// Threads: a Store belongs to one replica. Every method REQUIRES that
// replica's raftMu (RawNode calls the raft.Storage methods from inside its
// own calls, which are made under it), except where noted.
package logstore

import (
	"errors"
	"fmt"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// Reader is what the Store reads from: the DB or one of its snapshots.
type Reader interface {
	Get(key []byte) ([]byte, error)
	NewIter(opts *storage.IterOptions) (*storage.Iterator, error)
}

// Store is the raft.Storage of one replica.
type Store struct {
	db      *storage.DB
	rangeID uint64

	hardState *pb.HardState
	// trunc is the last entry removed from the log: the log holds
	// (trunc.Index, last.Index].
	trunc LogPosition
	last  LogPosition
	// staged is the last index once every staged append is durable: the
	// log writer stages several appends of one replica into a batch
	// before any of them is committed. REQUIRES the log writer (and
	// raftMu).
	staged uint64
	// applied and confState describe the replica's applied state; Snapshot
	// reports them.
	applied   LogPosition
	confState *pb.ConfState
	// logBytes approximates the bytes of the entries in the log: exact
	// for entries appended since the process started, an estimate for the
	// rest.
	logBytes int64

	cache entryCache
}

var _ etcdraft.Storage = (*Store)(nil)

// ShareCache makes the entry cache keep to b as well, shared with the
// other caches of the node (CacheBudget). Call it once, before the first
// append. REQUIRES: the owning replica's raftMu (or sole ownership).
func (s *Store) ShareCache(b *CacheBudget) {
	s.cache.shared = b
	b.add(s.cache.bytes)
}

// ReleaseCache empties the entry cache, giving its bytes back to the
// shared budget: for a replica being destroyed. REQUIRES: raftMu.
func (s *Store) ReleaseCache() { s.cache.reset() }

// Load reads range rangeID's Raft state from the engine. A range with
// nothing stored yet (an uninitialized replica) loads as an empty log at
// index 0 with an empty HardState and ConfState. cacheBytes bounds the
// in-memory entry cache.
func Load(db *storage.DB, rangeID uint64, cacheBytes int) (*Store, error) {
	s := &Store{db: db, rangeID: rangeID, hardState: &pb.HardState{}, confState: &pb.ConfState{}}
	s.cache.budget = cacheBytes
	if v, err := getOptional(db, keys.HardStateKey(rangeID)); err != nil {
		return nil, err
	} else if v != nil {
		if s.hardState, err = DecodeHardState(v); err != nil {
			return nil, s.wrap(err)
		}
	}
	if v, err := getOptional(db, keys.TruncatedStateKey(rangeID)); err != nil {
		return nil, err
	} else if v != nil {
		if s.trunc, err = DecodeLogPosition("truncated state", v); err != nil {
			return nil, s.wrap(err)
		}
	}
	applied, cs, err := LoadAppliedState(db, rangeID)
	if err != nil {
		return nil, err
	}
	s.applied = applied
	if cs != nil {
		s.confState = cs
	}
	s.last = s.trunc
	// The last entry: the greatest log key of the range, if any.
	it, err := db.NewIter(&storage.IterOptions{LowerBound: keys.LogKey(rangeID, s.trunc.Index+1), UpperBound: keys.LogSpanAll(rangeID).End})
	if err != nil {
		return nil, fmt.Errorf("logstore: range %d: %w", rangeID, err)
	}
	defer it.Close()
	if it.Last() {
		idx, err := keys.LogIndex(it.UnsafeKey())
		if err != nil {
			return nil, s.wrap(corruptf("%v", err))
		}
		e, err := DecodeEntry(idx, it.UnsafeValue())
		if err != nil {
			return nil, s.wrap(err)
		}
		s.last = LogPosition{Index: idx, Term: e.GetTerm()}
		// A cheap estimate of the log's size: the entries are similar.
		s.logBytes = int64(idx-s.trunc.Index) * int64(EntrySize(e))
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("logstore: range %d: finding the last entry: %w", rangeID, err)
	}
	if s.applied.Index > s.last.Index && s.last.Index != 0 {
		return nil, s.wrap(corruptf("applied index %d is past the last log index %d", s.applied.Index, s.last.Index))
	}
	if s.applied.Index > s.hardState.GetCommit() {
		// The HardState is written only when its term or vote changes
		// (StageAppend), so its commit index trails the applied index,
		// which the apply batches write with the data. Every applied
		// entry was committed, so the commit index is at least the
		// applied index.
		s.hardState = &pb.HardState{Term: new(s.hardState.GetTerm()), Vote: new(s.hardState.GetVote()), Commit: new(s.applied.Index)}
	}
	return s, nil
}

func (s *Store) wrap(err error) error { return fmt.Errorf("range %d: %w", s.rangeID, err) }

// getOptional returns key's value, or nil (and no error) if it is missing.
func getOptional(r Reader, key []byte) ([]byte, error) {
	v, err := r.Get(key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: reading %x: %w", key, err)
	}
	return v, nil
}

// InitialState implements raft.Storage.
func (s *Store) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return s.hardState, s.confState, nil
}

// FirstIndex implements raft.Storage.
func (s *Store) FirstIndex() (uint64, error) { return s.trunc.Index + 1, nil }

// LastIndex implements raft.Storage.
func (s *Store) LastIndex() (uint64, error) { return s.last.Index, nil }

// Term implements raft.Storage.
func (s *Store) Term(i uint64) (uint64, error) {
	switch {
	case i == s.trunc.Index:
		return s.trunc.Term, nil
	case i < s.trunc.Index:
		return 0, etcdraft.ErrCompacted
	case i > s.last.Index:
		return 0, etcdraft.ErrUnavailable
	case i == s.last.Index:
		return s.last.Term, nil
	}
	if e := s.cache.get(i); e != nil {
		return e.GetTerm(), nil
	}
	v, err := s.db.Get(keys.LogKey(s.rangeID, i))
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return 0, s.wrap(corruptf("log entry %d is missing from (%d, %d]", i, s.trunc.Index, s.last.Index))
		}
		return 0, fmt.Errorf("logstore: range %d: reading entry %d: %w", s.rangeID, i, err)
	}
	e, err := DecodeEntry(i, v)
	if err != nil {
		return 0, s.wrap(err)
	}
	return e.GetTerm(), nil
}

// Entries implements raft.Storage: entries [lo, hi), at most maxSize bytes
// (but at least one). The returned slice is freshly allocated.
func (s *Store) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	if lo <= s.trunc.Index {
		return nil, etcdraft.ErrCompacted
	}
	if hi > s.last.Index+1 {
		return nil, fmt.Errorf("logstore: range %d: entries [%d, %d) requested past the last index %d", s.rangeID, lo, hi, s.last.Index)
	}
	if lo >= hi {
		return nil, nil
	}
	var out []*pb.Entry
	var size uint64
	add := func(e *pb.Entry) bool {
		size += uint64(EntrySize(e))
		if len(out) > 0 && size > maxSize {
			return false
		}
		out = append(out, e)
		return true
	}
	// Cached entries form a suffix of the log: read the engine only for
	// the part before the cache.
	next := lo
	if cf := s.cache.first(); cf == 0 || lo < cf {
		end := hi
		if cf != 0 && cf < hi {
			end = cf
		}
		it, err := s.db.NewIter(&storage.IterOptions{LowerBound: keys.LogKey(s.rangeID, lo), UpperBound: keys.LogKey(s.rangeID, end)})
		if err != nil {
			return nil, fmt.Errorf("logstore: range %d: %w", s.rangeID, err)
		}
		full := false
		for ok := it.First(); ok; ok = it.Next() {
			idx, err := keys.LogIndex(it.UnsafeKey())
			if err != nil {
				it.Close()
				return nil, s.wrap(corruptf("%v", err))
			}
			if idx != next {
				it.Close()
				return nil, s.wrap(corruptf("log entry %d is missing (found %d next)", next, idx))
			}
			e, err := DecodeEntry(idx, it.Value())
			if err != nil {
				it.Close()
				return nil, s.wrap(err)
			}
			if !add(e) {
				full = true
				break
			}
			next++
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return nil, fmt.Errorf("logstore: range %d: reading entries [%d, %d): %w", s.rangeID, lo, end, err)
		}
		if full {
			return out, nil
		}
		if next != end {
			return nil, s.wrap(corruptf("log entries [%d, %d) are missing", next, end))
		}
	}
	for ; next < hi; next++ {
		e := s.cache.get(next)
		if e == nil {
			return nil, s.wrap(corruptf("entry %d is neither cached nor stored", next))
		}
		if !add(e) {
			break
		}
	}
	return out, nil
}

// Snapshot implements raft.Storage. It describes the replica's applied
// state; the data itself is read from an engine snapshot when the
// snapshot is sent (and the metadata is then replaced by that of the
// engine snapshot, which may be newer). See raft.Replica.sendSnapshot.
func (s *Store) Snapshot() (*pb.Snapshot, error) {
	if s.applied.Index == 0 {
		return nil, etcdraft.ErrSnapshotTemporarilyUnavailable
	}
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index:     new(s.applied.Index),
		Term:      new(s.applied.Term),
		ConfState: s.confState,
	}}, nil
}

// HardState returns the last durable HardState.
func (s *Store) HardState() *pb.HardState { return s.hardState }

// Truncated returns the last entry removed from the log.
func (s *Store) Truncated() LogPosition { return s.trunc }

// Last returns the last entry of the log.
func (s *Store) Last() LogPosition { return s.last }

// Applied returns the applied state as last set by SetApplied.
func (s *Store) Applied() LogPosition { return s.applied }

// LogBytes returns the approximate size of the log in bytes.
func (s *Store) LogBytes() int64 { return s.logBytes }

// SetApplied records the replica's applied state (after the apply batch
// holding it was written) so that Snapshot describes it.
func (s *Store) SetApplied(p LogPosition, cs *pb.ConfState) {
	s.applied = p
	if cs != nil {
		s.confState = cs
	}
}

// Append is a staged append: entries and a HardState written into a batch
// that is not yet durable.
type Append struct {
	ents []*pb.Entry
	hs   *pb.HardState
	// oldLast is the last index before the append; entries after the new
	// last index up to it were deleted.
	oldLast LogPosition
}

// StageAppend stages the Raft README's step 1 for one MsgStorageAppend: write ents
// (discarding any stored entries at or after ents[0], which a new leader
// has overwritten) and hs into b. Call CommitAppend once b is durable.
//
// hs is written only when its term or vote differs from the durable
// HardState's: a HardState that moves only its commit index is not
// written, although it becomes the Store's HardState at CommitAppend. The
// commit index is volatile state in Raft (a restarted replica learns it
// again from its leader, and a new leader re-commits its log by
// committing an entry of its own term), so a stale one on disk is safe;
// Load raises it to the applied index, which the apply batches persist
// with the data. Term and vote are Raft's promises and are written, and
// fsync'd, before the messages that depend on them leave. Commit-only
// HardStates were one engine record per range and round on every
// replica (docs/replication.md, "The log in the engine").
func (s *Store) StageAppend(b *storage.Batch, ents []*pb.Entry, hs *pb.HardState) Append {
	a := Append{ents: ents, oldLast: s.last}
	prevLast := max(s.last.Index, s.staged)
	var kbuf, vbuf []byte
	for _, e := range ents {
		kbuf = keys.AppendLogKey(kbuf[:0], s.rangeID, e.GetIndex())
		vbuf = EncodeEntry(vbuf[:0], e)
		b.Put(kbuf, vbuf)
	}
	if n := len(ents); n > 0 {
		newLast := ents[n-1].GetIndex()
		if newLast < prevLast {
			// The new entries replace a longer tail: delete the rest of it.
			b.DeleteRange(keys.LogKey(s.rangeID, newLast+1), keys.LogKey(s.rangeID, prevLast+1))
		}
		s.staged = newLast
	}
	if hs != nil && !etcdraft.IsEmptyHardState(hs) {
		if hs.GetTerm() != s.hardState.GetTerm() || hs.GetVote() != s.hardState.GetVote() {
			b.Put(keys.HardStateKey(s.rangeID), EncodeHardState(hs))
		}
		a.hs = hs
	}
	return a
}

// TakeCommit takes hs as the HardState if only its commit index differs
// from the one held: StageAppend writes nothing for such a change (the
// commit index is volatile), so it needs no log write. It reports whether
// it took hs; a change of term or vote must go through StageAppend.
func (s *Store) TakeCommit(hs *pb.HardState) bool {
	if hs.GetTerm() != s.hardState.GetTerm() || hs.GetVote() != s.hardState.GetVote() {
		return false
	}
	s.hardState = hs
	return true
}

// CommitAppend makes a durable append visible to Raft.
func (s *Store) CommitAppend(a Append) {
	if n := len(a.ents); n > 0 {
		first := a.ents[0].GetIndex()
		// Entries at or after first that were stored before are replaced.
		if first <= s.last.Index {
			for i := first; i <= s.last.Index && i > s.trunc.Index; i++ {
				// The sizes of replaced entries are unknown unless cached;
				// the estimate corrects itself at the next truncation.
				if e := s.cache.get(i); e != nil {
					s.logBytes -= int64(EntrySize(e))
				}
			}
		}
		for _, e := range a.ents {
			s.logBytes += int64(EntrySize(e))
		}
		last := a.ents[n-1]
		s.last = LogPosition{Index: last.GetIndex(), Term: last.GetTerm()}
		s.cache.appendEntries(a.ents)
	}
	if a.hs != nil {
		s.hardState = a.hs
	}
}

// SnapshotApply is a staged snapshot application.
type SnapshotApply struct {
	pos LogPosition
	hs  *pb.HardState
	cs  *pb.ConfState
}

// StageSnapshot stages the log side of applying a snapshot taken at
// meta's index: the whole log is deleted and the truncated state becomes
// the snapshot's position, along with hs (Raft's HardState after the
// snapshot). The caller stages the replicated data in the same batch.
func (s *Store) StageSnapshot(b *storage.Batch, meta *pb.SnapshotMetadata, hs *pb.HardState) SnapshotApply {
	pos := LogPosition{Index: meta.GetIndex(), Term: meta.GetTerm()}
	span := keys.LogSpanAll(s.rangeID)
	b.DeleteRange(span.Start, span.End)
	b.Put(keys.TruncatedStateKey(s.rangeID), pos.Encode())
	sa := SnapshotApply{pos: pos, cs: meta.GetConfState()}
	s.staged = pos.Index
	if hs != nil && !etcdraft.IsEmptyHardState(hs) {
		b.Put(keys.HardStateKey(s.rangeID), EncodeHardState(hs))
		sa.hs = hs
	}
	return sa
}

// CommitSnapshot makes a durable snapshot application visible to Raft.
func (s *Store) CommitSnapshot(sa SnapshotApply) {
	s.trunc = sa.pos
	s.last = sa.pos
	s.applied = sa.pos
	s.confState = sa.cs
	s.logBytes = 0
	s.cache.reset()
	if sa.hs != nil {
		s.hardState = sa.hs
	}
}

// Truncation is a staged log truncation.
type Truncation struct {
	pos LogPosition
}

// StageTruncate stages removing every entry up to and including index,
// which must be in the log and applied: one DeleteRange and the new
// truncated state. It returns false (and stages nothing) if there is
// nothing to remove.
func (s *Store) StageTruncate(b *storage.Batch, index uint64) (Truncation, bool, error) {
	if index <= s.trunc.Index {
		return Truncation{}, false, nil
	}
	if index > s.applied.Index || index > s.last.Index {
		return Truncation{}, false, fmt.Errorf("logstore: range %d: truncating to %d past the applied index %d or last index %d",
			s.rangeID, index, s.applied.Index, s.last.Index)
	}
	term, err := s.Term(index)
	if err != nil {
		return Truncation{}, false, err
	}
	pos := LogPosition{Index: index, Term: term}
	b.DeleteRange(keys.LogKey(s.rangeID, s.trunc.Index+1), keys.LogKey(s.rangeID, index+1))
	b.Put(keys.TruncatedStateKey(s.rangeID), pos.Encode())
	return Truncation{pos: pos}, true, nil
}

// CommitTruncate makes a written truncation visible.
func (s *Store) CommitTruncate(t Truncation) {
	if n := s.last.Index - s.trunc.Index; n > 0 {
		removed := t.pos.Index - s.trunc.Index
		s.logBytes -= s.logBytes * int64(removed) / int64(n)
	}
	s.trunc = t.pos
	s.cache.truncateFront(t.pos.Index)
}

// Equal reports whether two log positions are the same.
func (p LogPosition) Equal(o LogPosition) bool { return p == o }

// String formats p as index/term.
func (p LogPosition) String() string { return fmt.Sprintf("%d/%d", p.Index, p.Term) }
