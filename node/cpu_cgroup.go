package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A node in a container with a CPU limit (Docker's --cpus, a Kubernetes
// CPU limit: cgroup v2's cpu.max) is throttled once its cgroup has used
// its quota, however idle the host's CPUs look in /proc/stat. The sampler
// therefore also reads the cgroup's use against its quota, and the CPU
// counts as busy as the busier of the two (cpu.go).

// cgroupDirFor returns the cgroup v2 directory of the process whose
// /proc/<pid>/cgroup is data, under the cgroup file system mounted at
// root; "" when the process is not in a cgroup v2 hierarchy.
func cgroupDirFor(data []byte, root string) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return filepath.Join(root, filepath.Clean("/"+p))
		}
	}
	return ""
}

// readCgroupCPU reads the CPU limit (in CPUs) and the cumulative CPU use
// of the cgroup in dir. limit is 0 when the cgroup has no quota ("max",
// or no cpu.max file, as in the root cgroup).
func readCgroupCPU(dir string) (limit float64, usage time.Duration, err error) {
	max, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reading the cgroup's CPU limit: %w", err)
	}
	f := strings.Fields(string(max))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%s: want \"QUOTA PERIOD\", got %q", filepath.Join(dir, "cpu.max"), max)
	}
	if f[0] == "max" {
		return 0, 0, nil
	}
	quota, err1 := strconv.ParseUint(f[0], 10, 64)
	period, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || period == 0 {
		return 0, 0, fmt.Errorf("%s: malformed %q", filepath.Join(dir, "cpu.max"), max)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, 0, fmt.Errorf("reading the cgroup's CPU use: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "usage_usec "); ok {
			us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("%s: usage_usec: %w", filepath.Join(dir, "cpu.stat"), err)
			}
			return float64(quota) / float64(period), time.Duration(us) * time.Microsecond, nil
		}
	}
	return 0, 0, fmt.Errorf("%s: no usage_usec", filepath.Join(dir, "cpu.stat"))
}
