package node

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCgroupDirFor(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{"0::/system.slice/shale.service\n", "/sys/fs/cgroup/system.slice/shale.service"},
		{"12:cpu:/x\n0::/\n", "/sys/fs/cgroup"},
		{"4:memory:/a\n1:cpu:/\n", ""}, // cgroup v1 only
		{"0::/../../etc\n", "/sys/fs/cgroup/etc"},
	} {
		if got := cgroupDirFor([]byte(c.data), "/sys/fs/cgroup"); got != c.want {
			t.Errorf("cgroupDirFor(%q) = %q; want %q", c.data, got, c.want)
		}
	}
}

func TestReadCgroupCPU(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// No cpu.max (the root cgroup): no quota.
	if limit, _, err := readCgroupCPU(dir); err != nil || limit != 0 {
		t.Fatalf("without cpu.max: %v, %v", limit, err)
	}
	write("cpu.max", "max 100000\n")
	if limit, _, err := readCgroupCPU(dir); err != nil || limit != 0 {
		t.Fatalf("unlimited: %v, %v", limit, err)
	}
	write("cpu.max", "150000 100000\n")
	if _, _, err := readCgroupCPU(dir); err == nil {
		t.Fatal("a quota without cpu.stat read")
	}
	write("cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
	limit, usage, err := readCgroupCPU(dir)
	if err != nil || limit != 1.5 || usage != 2500*time.Millisecond {
		t.Fatalf("1.5 CPUs: %v, %v, %v", limit, usage, err)
	}
	for _, bad := range []string{"150000\n", "x 100000\n", "150000 0\n"} {
		write("cpu.max", bad)
		if _, _, err := readCgroupCPU(dir); err == nil {
			t.Errorf("cpu.max %q read", bad)
		}
	}
}

// TestCPUSamplerCountsTheQuota: a node that uses its whole CPU quota is
// busy even while the host's CPUs are mostly idle.
func TestCPUSamplerCountsTheQuota(t *testing.T) {
	dir := t.TempDir()
	stat := filepath.Join(dir, "stat")
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &cpuSampler{statPath: stat, cgroup: dir}
	write(filepath.Join(dir, "cpu.max"), "50000 100000\n") // half a CPU
	start := time.Now().Add(-time.Minute)
	for i := 0; i < 4; i++ {
		// The host: 10% busy each second. The cgroup: half a CPU-second
		// each second, all of its quota.
		write(stat, fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\n", 10*i, 90*i))
		write(filepath.Join(dir, "cpu.stat"), fmt.Sprintf("usage_usec %d\n", 500000*i))
		s.sample(start.Add(time.Duration(i) * time.Second))
	}
	if cpu := s.stats(); !cpu.GetKnown() || math.Abs(cpu.GetHostBusy()-1) > 1e-9 {
		t.Fatalf("stats = %v; want busy 1 (the quota used up)", cpu)
	}
	// Without the quota the same host is 10% busy.
	write(filepath.Join(dir, "cpu.max"), "max 100000\n")
	s = &cpuSampler{statPath: stat, cgroup: dir}
	for i := 0; i < 4; i++ {
		write(stat, fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\n", 10*i, 90*i))
		s.sample(start.Add(time.Duration(i) * time.Second))
	}
	if cpu := s.stats(); math.Abs(cpu.GetHostBusy()-0.1) > 1e-9 {
		t.Fatalf("stats = %v; want busy 0.1 without a quota", cpu)
	}
}
