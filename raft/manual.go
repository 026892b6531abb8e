package raft

import (
	"cmp"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/storage"
)

// Manual processing (Config.Manual): the caller drives the Store one step
// at a time from its own goroutine, so that a deterministic simulator
// (sim/) decides the order of everything the Store does.
//
// A manual Store starts no processing loop, log writer or ticker, and its
// worker pool has no goroutines: a round runs entirely on the caller's
// goroutine (one apply group). The caller calls
//
//   - StepRound to run one processing round over the replicas queued so
//     far (what the processing loop does each time it wakes up);
//   - StepLogWrite to persist the log writes queued by earlier rounds and
//     deliver the messages that waited for them (what the log writer does
//     each time it wakes up): until then they are not on disk, so a
//     simulated crash in between loses them, as a power loss loses an
//     unsynced write;
//   - Tick to tick every replica once (what the ticker does every
//     TickInterval).
//
// What still runs on other goroutines: the callers of Propose, ReadBarrier
// and the other blocking calls, the snapshot senders, and the few internal
// goroutines the Store starts for background work (proposeAsync's waiter,
// a stale merge's settling, meta pushes) and the callbacks of the Clock's
// AfterFunc. They wait on channels the rounds complete, so a simulator that
// lets them run until they block after each step (testing/synctest's Wait)
// sees the same sequence of states for the same sequence of steps.

// poolWorkers is the worker pool of a manual Store: no goroutines (the
// only group of a round runs inline, see workerPool.each).
func (s *Store) poolWorkers() (goroutines, groups int) {
	if s.cfg.Manual {
		return 0, 1
	}
	return s.cfg.Workers, s.cfg.Workers
}

// take takes every queued replica without blocking (nil if none),
// clearing their queued flags, as next does. They come in range order:
// the order they were queued in follows Go's map iteration in places.
func (s *scheduler) take() []*Replica {
	s.mu.Lock()
	q := s.mu.queue
	s.mu.queue = nil
	s.mu.Unlock()
	for _, r := range q {
		r.queued.Store(false)
	}
	slices.SortFunc(q, func(a, b *Replica) int { return cmp.Compare(a.rangeID, b.rangeID) })
	return q
}

// take takes every queued log write without blocking (nil if none).
func (q *appendQueue) take() []*appendWork {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := q.works
	q.works = nil
	return ws
}

// pending reports whether log writes are queued.
func (q *appendQueue) pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.works) > 0
}

// StepRound runs one processing round over the replicas queued now, and
// reports whether there were any. Manual Stores only.
func (s *Store) StepRound() bool {
	s.mustBeManual("StepRound")
	if s.checkRunning() != nil {
		return false
	}
	reps := s.sched.take()
	if len(reps) == 0 {
		return false
	}
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	s.processRound(reps)
	return true
}

// RoundPending reports whether replicas are queued for a round.
func (s *Store) RoundPending() bool {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	return len(s.sched.mu.queue) > 0
}

// StepLogWrite persists the log writes queued now, in one batch as the log
// writer does, delivers the messages that waited for them, and reports
// whether there were any. Manual Stores only.
func (s *Store) StepLogWrite() bool {
	s.mustBeManual("StepLogWrite")
	if s.checkRunning() != nil {
		return false
	}
	works := s.appendQ.take()
	if len(works) == 0 {
		return false
	}
	if s.manualBatch == nil {
		s.manualBatch = storage.NewBatch(64 << 10)
	}
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	s.writeAppends(works, s.manualBatch)
	return true
}

// LogWritePending reports whether log writes are queued.
func (s *Store) LogWritePending() bool { return s.appendQ.pending() }

// Tick ticks every replica once. Manual Stores only.
func (s *Store) Tick() {
	s.mustBeManual("Tick")
	if s.checkRunning() != nil {
		return
	}
	s.tickReplicas()
}

// stepBarrier is where a goroutine woken by a step (a proposer, a reader,
// a snapshot's receiver) waits for the step to end, in manual mode: the
// rest of the step runs on the simulator's goroutine, and what the woken
// goroutine does next (read the engine, queue more work) must come after
// it, not at whatever moment the Go scheduler runs it.
func (s *Store) stepBarrier() {
	if s.cfg.Manual {
		s.stepMu.Lock()   // waits for the step...
		s.stepMu.Unlock() // ...and holds nothing

	}
}

func (s *Store) mustBeManual(what string) {
	if !s.cfg.Manual {
		panic("raft: " + what + " needs Config.Manual")
	}
}

// sendEarlyAcks is the planted bug BugAckBeforeSync: the messages that
// must wait for a log write (a follower's append acknowledgement, a vote)
// go out when the write is queued, before it is on disk.
func (s *Store) sendEarlyAcks(works []*appendWork) {
	if s.cfg.Testing.Bug != BugAckBeforeSync {
		return
	}
	byNode := make(map[uint64][]*raftrpcpb.RangeMessage)
	for _, w := range works {
		r := w.r
		r.raftMu.Lock()
		var keep []*pb.Message
		for _, resp := range w.m.GetResponses() {
			if resp.GetTo() == r.replicaID {
				keep = append(keep, resp)
				continue
			}
			if rm := r.rangeMessageLocked(resp); rm != nil {
				byNode[rm.GetToNodeId()] = append(byNode[rm.GetToNodeId()], rm)
			}
		}
		w.m.Responses = keep
		r.raftMu.Unlock()
	}
	for node, msgs := range byNode {
		s.transport.Send(node, msgs)
	}
}
