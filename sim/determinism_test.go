package sim

import "testing"

// TestSameSeedSameTrace: two runs of one seed take the same steps,
// deliver the same messages and see the same outcomes.
func TestSameSeedSameTrace(t *testing.T) {
	for _, seed := range []uint64{7, 8} {
		var a, b Result
		t.Run("", func(t *testing.T) { a = Run(t, Options{Seed: seed}) })
		t.Run("", func(t *testing.T) { b = Run(t, Options{Seed: seed}) })
		if a.TraceHash != b.TraceHash || a.Steps != b.Steps {
			t.Errorf("seed %d: two runs differ: trace %x after %d steps, then %x after %d steps", seed, a.TraceHash, a.Steps, b.TraceHash, b.Steps)
		}
		if a.OpsOK == 0 {
			t.Errorf("seed %d: no client operation succeeded", seed)
		}
	}
}
