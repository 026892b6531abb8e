package rangesm

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// Config configures a Factory.
type Config struct {
	// Engine holds every range's state; the caller opens and closes it.
	Engine *storage.DB
	// Logger; defaults to slog.Default().
	Logger *slog.Logger
	// Observe, if set, is given each new frontier a replica publishes
	// (after the versions up to it reached the engine), so that the
	// node's clock follows the versions it applies. It runs on the apply
	// path: it must be cheap and must not block.
	Observe func(frontier hlc.Timestamp)
	// Feed, if set, receives the changes replicas apply to watched
	// ranges (feed.go).
	Feed FeedSink
}

// Factory makes the range state machines of one node (apply.Factory).
type Factory struct {
	cfg Config
	// metaIdx indexes this node's copy of meta's descriptors by range ID.
	metaIdx *descIndex
}

var _ apply.Factory = (*Factory)(nil)

// NewFactory returns the factory of the state machines of the ranges kept
// in cfg.Engine.
func NewFactory(cfg Config) (*Factory, error) {
	if cfg.Engine == nil {
		return nil, errors.New("rangesm: Config needs an Engine")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Factory{cfg: cfg, metaIdx: &descIndex{}}, nil
}

// New implements apply.Factory: it loads range rangeID's state machine.
func (f *Factory) New(rangeID uint64, host apply.Host) (apply.StateMachine, error) {
	r := &Range{
		db:      f.cfg.Engine,
		log:     f.cfg.Logger,
		host:    host,
		rangeID: rangeID,
		observe: f.cfg.Observe,
		sink:    f.cfg.Feed,
		metaIdx: f.metaIdx,
	}
	r.ov.init(f.cfg.Engine, host.WriteEngine, host.Counters().Writes)
	if err := r.Restore(); err != nil {
		return nil, err
	}
	return r, nil
}

// Meta implements apply.Factory.
func (f *Factory) Meta() apply.MetaReader { return metaReader{f.cfg.Engine, f.metaIdx} }

// Range is the state machine of one replica of a range (apply.StateMachine):
// it evaluates the range's commands against its applied state and stages
// their writes.
//
// REQUIRES: the replica's raftMu for every method (the caller's, see
// apply.StateMachine).
type Range struct {
	db      *storage.DB
	log     *slog.Logger
	host    apply.Host
	rangeID uint64
	// metaIdx indexes meta's descriptors by range ID (meta_index.go):
	// the meta range's replica keeps it; shared with the Factory's reader.
	metaIdx *descIndex
	// desc is the applied descriptor (nil while uninitialized).
	desc *kvpb.RangeDescriptor
	// frozen is the applied freeze record (nil when not frozen; merge.go).
	frozen *freezeRecord
	// dedup caches the range's dedup state (dedup_cache.go).
	dedup dedupCache
	// pendingSplit is the right-hand range of the split being applied,
	// when this node creates its replica (split.go).
	pendingSplit *kvpb.RangeDescriptor
	// ov is the apply batch and the overlay that reads through it.
	ov overlay
	// w adds the versions of user keys to ov's batch; created on first use
	// and dropped when the batch is written (it reads the engine state the
	// batch applies over, plus its own writes).
	w *mvcc.Writer
	// st is the MVCC state as applied so far (mvcc_state.go); stDirty says
	// it changed since it was last staged; applying is the index of the
	// entry being applied.
	st       mvccState
	stDirty  bool
	applying uint64
	// applyingTerm is the Raft term of the entry being applied (a lease
	// expiry is refused in any term but the one it was decided in).
	applyingTerm uint64
	// published is st as of the last batch written: what reads go by;
	// observe is told each new published frontier (Config.Observe).
	published atomic.Pointer[MVCCState]
	observe   func(hlc.Timestamp)
	// stats are the MVCC stats as applied so far (mvcc_stats.go);
	// statsDirty says they changed since they were last staged; wCounted
	// is the part of w's delta already added to them.
	// legacyState says st and stats were read from records of their
	// own, not the applied state, which the next staging of them
	// deletes; applied is the applied position they were last staged
	// with (mvcc_state.go).
	stats       mvcc.Stats
	statsDirty  bool
	legacyState bool
	applied     logstore.LogPosition
	wCounted    mvcc.Stats
	// wSpare is the last batch's Writer, whose memory the next batch's
	// reuses (dropWriter).
	wSpare *mvcc.Writer
	// intents is the number of entries in the range's lock table as
	// applied so far, the apply batch included (intent.go).
	intents int
	// sink and feed: the change feed (feed.go).
	sink FeedSink
	feed feedState
}

// writer returns the Writer of user versions into the apply batch.
// REQUIRES: the replica's raftMu.
func (r *Range) writer() *mvcc.Writer {
	if r.w == nil {
		if r.wSpare != nil {
			r.w, r.wSpare = r.wSpare, nil
			r.w.Reset(r.db, r.ov.batch)
		} else {
			r.w = keys.UserKeyspace.NewWriter(r.db, r.ov.batch)
		}
		r.wCounted = mvcc.Stats{}
	}
	if r.feed.collecting {
		r.w.OnChange = r.onChange
	} else {
		r.w.OnChange = nil
	}
	return r.w
}

// flush writes the apply batch before a command reads the engine
// directly, with the MVCC state of the entries in it.
// REQUIRES: the replica's raftMu.
func (r *Range) flush() error {
	r.stageMVCCState()
	r.dropWriter()
	return r.ov.flush()
}

// Descriptor implements apply.StateMachine.
func (r *Range) Descriptor() *kvpb.RangeDescriptor { return r.desc }

// Frozen implements apply.StateMachine.
func (r *Range) Frozen() (left, leftGeneration uint64, frozen bool) {
	if r.frozen == nil {
		return 0, 0, false
	}
	return r.frozen.left, r.frozen.leftGen, true
}

// Batch implements apply.StateMachine.
func (r *Range) Batch() *storage.Batch { return r.ov.batch }

// Written implements apply.StateMachine: the batch is in the engine, so
// the MVCC state it carried is published to readers.
func (r *Range) Written() {
	r.ov.reset()
	r.dropWriter()
	r.publish()
}

// Rest implements apply.StateMachine: the range is at rest, so the apply
// batch's buffers are freed until it next applies.
func (r *Range) Rest() {
	if r.ov.batch.Empty() {
		r.ov.release()
	}
	r.wSpare = nil
}

// dropWriter ends the batch's Writer; the next batch's reuses its memory
// (mvcc.Writer.Reset) unless the range comes to rest first.
// REQUIRES: the replica's raftMu.
func (r *Range) dropWriter() {
	if r.w != nil {
		r.wSpare, r.w = r.w, nil
	}
}

// Restore implements apply.StateMachine: the descriptor, the freeze, the
// MVCC state and the count of intents are read again and the dedup cache is emptied (a snapshot
// replaced the dedup state).
func (r *Range) Restore() error {
	desc, err := logstore.LoadDescriptor(r.db, r.rangeID)
	if err != nil {
		return err
	}
	frozen, err := loadFreeze(r.db, r.rangeID)
	if err != nil {
		return fmt.Errorf("range %d: %w", r.rangeID, err)
	}
	st, stats, applied, legacy, err := loadMVCCState(r.db, r.rangeID)
	if err != nil {
		return err
	}
	if r.rangeID == keys.MetaRangeID {
		// A snapshot may have replaced meta's descriptors.
		if err := r.metaIdx.rebuild(r.db); err != nil {
			return fmt.Errorf("meta descriptor index: %w", err)
		}
	}
	intents, err := countIntents(r.db, r.rangeID)
	if err != nil {
		return fmt.Errorf("range %d: lock table: %w", r.rangeID, err)
	}
	r.intents = intents
	r.desc, r.frozen, r.st, r.stDirty = desc, frozen, st, false
	r.stats, r.statsDirty, r.legacyState, r.applied = stats, false, legacy, applied
	r.w, r.wSpare = nil, nil
	r.dedup.clear()
	// What a snapshot brought was not collected.
	r.feed.incomplete = true
	r.feed.changes = nil
	r.publish()
	return nil
}
