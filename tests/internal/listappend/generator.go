package listappend

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// GenConfig shapes the generated transactions. Zero fields take the
// defaults noted.
type GenConfig struct {
	// KeyPrefix starts every key (default "la/"), so the workload's keys
	// stay apart from others in the store.
	KeyPrefix string
	// Keys is how many keys are live at once (default 8): fewer keys mean
	// more contention, which is where anomalies show.
	Keys int
	// MinOps and MaxOps bound the micro-ops per transaction (default 1
	// and 4).
	MinOps, MaxOps int
	// ReadShare is the share of reads among micro-ops (default 0.5).
	ReadShare float64
	// MaxAppends retires a key after this many appends (default 32) and
	// moves its slot to a fresh key, so lists, and reads of them, stay
	// short however long the run.
	MaxAppends int
}

// SplitKeys returns the key prefixes of every slot but the first: the
// split points that put each slot's keys (every generation of them) in a
// range of their own, so that transactions touching several keys are
// transactions across ranges.
func (c GenConfig) SplitKeys() []string {
	c = c.withDefaults()
	out := make([]string, 0, c.Keys-1)
	for slot := 1; slot < c.Keys; slot++ {
		out = append(out, fmt.Sprintf("%s%d/", c.KeyPrefix, slot))
	}
	return out
}

func (c GenConfig) withDefaults() GenConfig {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "la/"
	}
	if c.Keys <= 0 {
		c.Keys = 8
	}
	if c.MinOps <= 0 {
		c.MinOps = 1
	}
	if c.MaxOps < c.MinOps {
		c.MaxOps = max(c.MinOps, 4)
	}
	if c.ReadShare <= 0 || c.ReadShare > 1 {
		c.ReadShare = 0.5
	}
	if c.MaxAppends <= 0 {
		c.MaxAppends = 32
	}
	return c
}

// Generator makes transactions of unique appends and reads over a few
// live keys. It is safe for concurrent use; each caller passes its own
// random source.
type Generator struct {
	cfg GenConfig

	mu    sync.Mutex
	slots []keySlot
}

// keySlot is one live key: its name and the elements appended so far.
type keySlot struct {
	gen     int
	appends int
}

// NewGenerator returns a generator for cfg.
func NewGenerator(cfg GenConfig) *Generator {
	cfg = cfg.withDefaults()
	return &Generator{cfg: cfg, slots: make([]keySlot, cfg.Keys)}
}

// Next returns a new transaction's micro-ops. Every append's element is
// unique for its key (1, 2, 3, ... per key).
func (g *Generator) Next(rng *rand.Rand) []MicroOp {
	n := g.cfg.MinOps + rng.IntN(g.cfg.MaxOps-g.cfg.MinOps+1)
	ops := make([]MicroOp, n)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range ops {
		slot := rng.IntN(len(g.slots))
		s := &g.slots[slot]
		key := fmt.Sprintf("%s%d/%d", g.cfg.KeyPrefix, slot, s.gen)
		if rng.Float64() < g.cfg.ReadShare {
			ops[i] = MicroOp{Kind: Read, Key: key}
			continue
		}
		s.appends++
		ops[i] = MicroOp{Kind: Append, Key: key, Value: s.appends}
		if s.appends >= g.cfg.MaxAppends {
			*s = keySlot{gen: s.gen + 1}
		}
	}
	return ops
}
