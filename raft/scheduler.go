package raft

import "sync"

// scheduler is the queue of replicas with work (CockroachDB's raft
// scheduler, reduced to what one processing round at a time needs).
//
// Anything that gives a replica work (an incoming message, a proposal, a
// tick, a read) records the work in the replica's inbox and then calls
// enqueue. A replica already queued is not queued again: its queued flag
// is cleared only when a round takes it, and the round drains its whole
// inbox, so work added before that is handled by that round and work added
// after it re-queues the replica for the next one.
type scheduler struct {
	mu struct {
		sync.Mutex
		queue   []*Replica
		stopped bool
	}
	// wake holds one pending signal: "the queue may be non-empty".
	wake chan struct{}
}

func newScheduler() *scheduler {
	return &scheduler{wake: make(chan struct{}, 1)}
}

// enqueue queues r unless it is queued already.
func (s *scheduler) enqueue(r *Replica) {
	if !r.queued.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	s.mu.queue = append(s.mu.queue, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next blocks until replicas are queued and takes all of them, clearing
// their queued flags. It returns nil once the scheduler is stopped.
func (s *scheduler) next() []*Replica {
	for {
		s.mu.Lock()
		if s.mu.stopped {
			s.mu.Unlock()
			return nil
		}
		q := s.mu.queue
		s.mu.queue = nil
		s.mu.Unlock()
		if len(q) > 0 {
			for _, r := range q {
				r.queued.Store(false)
			}
			return q
		}
		<-s.wake
	}
}

func (s *scheduler) stop() {
	s.mu.Lock()
	s.mu.stopped = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// workerPool runs the per-replica phases of a round on a fixed set of
// goroutines, so that many ranges are processed in parallel without a
// goroutine per range.
type workerPool struct {
	tasks chan func()
	wg    sync.WaitGroup
}

func newWorkerPool(n int) *workerPool {
	p := &workerPool{tasks: make(chan func(), n)}
	p.wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer p.wg.Done()
			for f := range p.tasks {
				f()
			}
		}()
	}
	return p
}

// each runs f(i) for i in [0, n) on the pool and waits for all of them.
// The last item runs inline, on the caller's goroutine, which would
// otherwise only wait: one hand-over (a goroutine wake-up, often a thread
// switch) less per round, and none at all for a single item.
func (p *workerPool) each(n int, f func(i int)) {
	if n == 0 {
		return
	}
	var wg sync.WaitGroup
	wg.Add(n - 1)
	for i := 0; i < n-1; i++ {
		p.tasks <- func() {
			defer wg.Done()
			f(i)
		}
	}
	f(n - 1)
	wg.Wait()
}

func (p *workerPool) stop() {
	close(p.tasks)
	p.wg.Wait()
}
