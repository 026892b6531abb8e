package node

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseProcStatCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice:
	// guest time is part of user time, so it is not added again.
	stat := "cpu  100 5 50 800 20 3 2 10 40 0\ncpu0 50 2 25 400 10 1 1 5 20 0\nintr 1 2 3\n"
	busy, total, err := parseProcStatCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if total != 990 || busy != 170 {
		t.Fatalf("busy, total = %d, %d; want 170, 990", busy, total)
	}
	// Old kernels have fewer fields.
	if busy, total, err := parseProcStatCPU([]byte("cpu 1 2 3 4\n")); err != nil || busy != 6 || total != 10 {
		t.Fatalf("four fields: %d, %d, %v", busy, total, err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5\n", "cpu 1 2 x 4 5\n"} {
		if _, _, err := parseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestCPUSamplerWindow: the host's use is the median of its use between
// consecutive readings, over the readings of the last window; older ones
// are dropped as new ones come.
func TestCPUSamplerWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	write := func(busy, idle uint64) {
		t.Helper()
		line := fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\n", busy, idle)
		if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &cpuSampler{statPath: path}
	if s.stats().GetKnown() {
		t.Fatal("known before any reading")
	}
	// Three seconds: 90% busy, 10% (say, a pause), 90%. (The readings
	// are a minute old, so stats' own reading of the unchanged file adds
	// an interval without CPU time, which does not count.)
	start := time.Now().Add(-time.Minute)
	write(100, 900)
	s.sample(start)
	if s.stats().GetKnown() {
		t.Fatal("known from a single reading of an unchanged file")
	}
	write(1000, 1000)
	s.sample(start.Add(time.Second))
	write(1100, 1900)
	s.sample(start.Add(2 * time.Second))
	write(2000, 2000)
	s.sample(start.Add(3 * time.Second))
	cpu := s.stats()
	if !cpu.GetKnown() || math.Abs(cpu.GetHostBusy()-0.9) > 1e-9 || cpu.GetHostCpus() == 0 {
		t.Fatalf("stats = %v; want host busy 0.9 (the median of 0.9, 0.1, 0.9)", cpu)
	}
	// A reading a window after the last drops every earlier one but it:
	// the use is then that of the one interval left, 10%.
	write(2100, 2900)
	s.sample(start.Add(3*time.Second + cpuWindow))
	if len(s.readings) != 2 || s.readings[0].hostBusy != 2000 {
		t.Fatalf("readings kept: %+v", s.readings)
	}
	if cpu := s.stats(); math.Abs(cpu.GetHostBusy()-0.1) > 1e-9 || cpu.GetWindowSeconds() < cpuWindow.Seconds() {
		t.Fatalf("stats = %v; want host busy 0.1 over one window", cpu)
	}
	// A host whose CPU times cannot be read is unknown, not idle.
	if err := os.WriteFile(path, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.sample(start.Add(4*time.Second + cpuWindow))
	if cpu := s.stats(); cpu.GetKnown() {
		t.Fatalf("stats = %v after an unreadable sample", cpu)
	}
	if !strings.Contains(fmt.Sprint(s.err), path) {
		t.Fatalf("sample error %v does not name the file", s.err)
	}
}
