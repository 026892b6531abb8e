package listappend

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The generator keeps its promises: sizes within bounds, keys under the
// prefix, at most Keys live at once, every element unique per key, and a
// key retired after MaxAppends.
func TestGenerator(t *testing.T) {
	cfg := GenConfig{KeyPrefix: "t/", Keys: 3, MinOps: 2, MaxOps: 5, ReadShare: 0.3, MaxAppends: 10}
	g := NewGenerator(cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]map[int]bool{}
	reads, appends := 0, 0
	for range 2000 {
		ops := g.Next(rng)
		if len(ops) < 2 || len(ops) > 5 {
			t.Fatalf("%d micro-ops, want 2 to 5", len(ops))
		}
		for _, m := range ops {
			if !strings.HasPrefix(m.Key, "t/") {
				t.Fatalf("key %q outside the prefix", m.Key)
			}
			if m.Kind == Read {
				reads++
				continue
			}
			appends++
			if seen[m.Key] == nil {
				seen[m.Key] = map[int]bool{}
			}
			if seen[m.Key][m.Value] {
				t.Fatalf("%d appended twice to %s", m.Value, m.Key)
			}
			seen[m.Key][m.Value] = true
		}
	}
	for k, vs := range seen {
		if len(vs) > 10 {
			t.Fatalf("%s took %d appends, more than MaxAppends", k, len(vs))
		}
	}
	if share := float64(reads) / float64(reads+appends); share < 0.25 || share > 0.35 {
		t.Fatalf("read share %.2f, want about 0.3", share)
	}
	if len(seen) < appends/10 {
		t.Fatalf("%d keys for %d appends: keys are not retired", len(seen), appends)
	}
}
