package sim

import (
	"fmt"
	"time"
)

// Faults of the faulty phase, drawn from the seed: network conditions
// change, partitions (symmetric and one-way) come and go, nodes crash and
// restart. At most one bootstrapped node is down at a time.

// startFaults sets the network's first conditions and schedules the
// faults.
func (s *Sim) startFaults() {
	s.drawNetParams()
	s.scheduleFault()
}

func (s *Sim) drawNetParams() {
	p := netParams{minDelay: 100 * time.Microsecond, maxDelay: time.Duration(1+s.rng.IntN(5)) * time.Millisecond}
	switch s.rng.IntN(4) {
	case 0: // clean
	case 1:
		p.drop = 0.05
	case 2:
		p.dup = 0.05
		p.maxDelay = 20 * time.Millisecond // much reordering
	case 3:
		p.drop, p.dup = 0.1, 0.02
	}
	s.net.params = p
	s.tracef("network drop=%.2f dup=%.2f delay=%v..%v", p.drop, p.dup, p.minDelay, p.maxDelay)
}

func (s *Sim) scheduleFault() {
	at := s.clock.Now().Add(50*time.Millisecond + time.Duration(s.rng.Int64N(int64(300*time.Millisecond))))
	if !at.Before(s.end) {
		return
	}
	s.schedule(at, "", func() {
		s.injectFault()
		s.scheduleFault()
	})
}

func (s *Sim) injectFault() {
	switch s.rng.IntN(7) {
	case 0:
		s.drawNetParams()
	case 1: // symmetric partition: one node, or a random group, cut off
		group := map[*node]bool{s.randomNode(): true}
		if s.rng.IntN(2) == 0 {
			for _, nd := range s.nodes {
				if s.rng.IntN(2) == 0 {
					group[nd] = true
				}
			}
		}
		var names []string
		for _, a := range s.nodes {
			if !group[a] {
				continue
			}
			names = append(names, fmt.Sprintf("n%d", a.id))
			for _, b := range s.nodes {
				if !group[b] {
					s.net.blocked[link{a.id, b.id}] = true
					s.net.blocked[link{b.id, a.id}] = true
				}
			}
		}
		s.tracef("partition %v from the rest", names)
		s.scheduleHeal()
	case 2: // one-way partition
		a, b := s.randomNode(), s.randomNode()
		if a != b {
			s.net.blocked[link{a.id, b.id}] = true
			s.tracef("partition n%d -> n%d", a.id, b.id)
			s.scheduleHeal()
		}
	case 3, 4:
		s.crashOne()
	case 5, 6:
		s.pauseOne()
	}
}

// pauseOne pauses a node, most often a leader (whose lease then must not
// outlive the pause).
func (s *Sim) pauseOne() {
	nd := s.randomNode()
	for _, cand := range s.nodes {
		if cand.up && s.rng.IntN(2) == 0 && leadsAny(cand) {
			nd = cand
			break
		}
	}
	if !nd.up || s.paused(nd) {
		return
	}
	nd.pausedUntil = s.clock.Now().Add(100*time.Millisecond + time.Duration(s.rng.Int64N(int64(500*time.Millisecond))))
	s.tracef("pause n%d until %v", nd.id, nd.pausedUntil.Sub(epoch))
}

func leadsAny(nd *node) bool {
	for _, r := range nd.store.Replicas() {
		if r.IsLeader() {
			return true
		}
	}
	return false
}

func (s *Sim) scheduleHeal() {
	at := s.clock.Now().Add(100*time.Millisecond + time.Duration(s.rng.Int64N(int64(500*time.Millisecond))))
	s.schedule(at, "heal", func() { s.net.blocked = map[link]bool{} })
}

// crashOne crashes a running node (preferring one with a log write in
// flight, whose loss matters most) if every other node runs, and
// schedules its restart.
func (s *Sim) crashOne() {
	var cands, pending []*node
	for _, nd := range s.nodes {
		if !nd.up {
			return
		}
		cands = append(cands, nd)
		if nd.store.LogWritePending() {
			pending = append(pending, nd)
		}
	}
	if len(pending) > 0 && s.rng.IntN(2) == 0 {
		cands = pending
	}
	nd := cands[s.rng.IntN(len(cands))]
	s.crash(nd)
	at := s.clock.Now().Add(time.Duration(s.rng.Int64N(int64(400 * time.Millisecond))))
	s.schedule(at, s.whatf("restart n%d", nd.id), func() {
		if !nd.up {
			s.startNode(nd)
		}
	})
}

func (s *Sim) randomNode() *node { return s.nodes[s.rng.IntN(len(s.nodes))] }

// healAll ends the faults: the network is clean, every node runs.
func (s *Sim) healAll() {
	s.net.blocked = map[link]bool{}
	s.net.params = netParams{minDelay: 100 * time.Microsecond, maxDelay: time.Millisecond}
	for _, nd := range s.nodes {
		if !nd.up {
			s.startNode(nd)
		}
	}
	s.tracef("healed")
}
