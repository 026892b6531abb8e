package sim

import (
	"bytes"
	"flag"
	"fmt"
	"testing"
)

var flagSameSeeds = flag.Int("same-seeds", 0, "TestSameSeedSameTrace runs this many seeds from -seed-base twice (default: seeds 7 and 9)")

// TestSameSeedSameTrace: two runs of one seed take the same steps,
// deliver the same messages and see the same outcomes (their trace
// hashes are equal). On a difference it shows the first trace line that
// differs.
func TestSameSeedSameTrace(t *testing.T) {
	seeds := []uint64{7, 9} // three nodes, five nodes
	if *flagSameSeeds > 0 {
		seeds = nil
		for i := 0; i < *flagSameSeeds; i++ {
			seeds = append(seeds, *flagBase+uint64(i))
		}
	}
	for _, seed := range seeds {
		var a, b Result
		var la, lb bytes.Buffer
		t.Run("", func(t *testing.T) { a = Run(t, Options{Seed: seed, Log: &la}) })
		t.Run("", func(t *testing.T) { b = Run(t, Options{Seed: seed, Log: &lb}) })
		if a.TraceHash != b.TraceHash || a.Steps != b.Steps {
			t.Errorf("seed %d: two runs differ: trace %x after %d steps, then %x after %d steps\n%s",
				seed, a.TraceHash, a.Steps, b.TraceHash, b.Steps, firstDiff(la.Bytes(), lb.Bytes()))
		}
		if a.OpsOK == 0 {
			t.Errorf("seed %d: no client operation succeeded", seed)
		}
	}
}

// firstDiff shows the first line where two traces differ.
func firstDiff(a, b []byte) string {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(al) && i < len(bl); i++ {
		if !bytes.Equal(al[i], bl[i]) {
			return fmt.Sprintf("first difference, line %d:\n  %s\n  %s", i+1, al[i], bl[i])
		}
	}
	return "one trace is a prefix of the other"
}
