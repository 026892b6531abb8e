package sim

import (
	"bytes"
	"os"
	"testing"
)

func TestTraceDiffDebug(t *testing.T) {
	if os.Getenv("SIM_DIFF") == "" {
		t.Skip()
	}
	var a, b bytes.Buffer
	t.Run("", func(t *testing.T) { Run(t, Options{Seed: 7, Log: &a}) })
	t.Run("", func(t *testing.T) { Run(t, Options{Seed: 7, Log: &b}) })
	os.WriteFile("/tmp/sim-a.txt", a.Bytes(), 0o644)
	os.WriteFile("/tmp/sim-b.txt", b.Bytes(), 0o644)
}
