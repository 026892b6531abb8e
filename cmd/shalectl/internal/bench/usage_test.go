package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseCPUTicks(t *testing.T) {
	// A command name with spaces and a ')' of its own; utime 7, stime 5.
	line := []byte("42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 3 0 99 1000 10 18446744073709551615\n")
	if got, err := parseCPUTicks(line); err != nil || got != 12 {
		t.Errorf("parseCPUTicks = %d, %v; want 12", got, err)
	}
	for _, bad := range []string{"42 no name S 1", "42 (x) S 1 2 3", "42 (x) S 1 42 42 0 -1 4 100 0 0 0 x 5 0"} {
		if _, err := parseCPUTicks([]byte(bad)); err == nil {
			t.Errorf("parseCPUTicks(%q): no error", bad)
		}
	}
}

func TestParseWriteBytes(t *testing.T) {
	io := []byte("rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 12288\ncancelled_write_bytes: 4096\n")
	if got, err := parseWriteBytes(io); err != nil || got != 8192 {
		t.Errorf("parseWriteBytes = %d, %v; want 8192", got, err)
	}
	if _, err := parseWriteBytes([]byte("rchar: 10\n")); err == nil {
		t.Error("parseWriteBytes without write_bytes: no error")
	}
}

func TestFindDiskstats(t *testing.T) {
	stats := []byte(" 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0\n" +
		" 254       0 vda 52637 7027 2050370 10558 522623 99841 11487720 165332 0 75924 233847\n" +
		" 254       1 vda1 10 0 80 1 20 0 160 2 0 3 3\n")
	if name, sectors, ok := findDiskstats(stats, 254, 0); !ok || name != "vda" || sectors != 11487720 {
		t.Errorf("254:0 = %q %d %v; want vda 11487720", name, sectors, ok)
	}
	if name, sectors, ok := findDiskstats(stats, 254, 1); !ok || name != "vda1" || sectors != 160 {
		t.Errorf("254:1 = %q %d %v; want vda1 160", name, sectors, ok)
	}
	if _, _, ok := findDiskstats(stats, 0, 42); ok {
		t.Error("0:42 (an overlay's anonymous device): found")
	}
}

// TestUsageMeterReadsThisProcess watches the test's own process while it
// spins and writes a synced file: the meter sees the CPU time and the
// bytes, from the real /proc.
func TestUsageMeterReadsThisProcess(t *testing.T) {
	dir := t.TempDir()
	m, err := newUsageMeter(Watch{Pids: []int{os.Getpid()}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	before, err := m.sample()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the process has used 50ms of CPU (bounded by 10s of
	// wall time on a busy machine).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		s, err := m.sample()
		if err != nil {
			t.Fatal(err)
		}
		if s.cpuTicks-before.cpuTicks >= 5 {
			break
		}
		for i := 0; i < 1_000_000; i++ {
			_ = bytes.Repeat([]byte{byte(i)}, 1)
		}
	}
	const size = 1 << 20
	f, err := os.Create(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{'x'}, size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	after, err := m.sample()
	if err != nil {
		t.Fatal(err)
	}
	u := m.usage(before, after)
	if u.CPUSeconds < 0.05 {
		t.Errorf("CPU seconds %.2f after spinning for 50ms of CPU", u.CPUSeconds)
	}
	if u.WriteBytes < size {
		t.Errorf("wrote %d bytes, process counted %d", size, u.WriteBytes)
	}
	if u.Device == "" {
		t.Logf("%s is on no block device of /proc/diskstats: device bytes not checked", dir)
	} else if u.DeviceBytes < size {
		t.Errorf("synced %d bytes to %s, device counted %d", size, u.Device, u.DeviceBytes)
	}

	if _, err := newUsageMeter(Watch{Pids: []int{os.Getpid()}, Dir: filepath.Join(dir, "missing")}); err == nil {
		t.Error("watching a missing directory: no error")
	}
	if _, err := newUsageMeter(Watch{}); err == nil {
		t.Error("watching no process: no error")
	}
}
