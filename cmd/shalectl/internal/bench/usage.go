package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Watch names the server processes of the system under test and a
// directory holding their data, so that a run can report what the servers
// spent during its timed phase (Linux only: it reads /proc).
type Watch struct {
	// Pids are the server processes; their CPU time and written bytes
	// are summed.
	Pids []int
	// Dir is on the block device whose written bytes are counted (the
	// whole device, so other writers on it count too).
	Dir string
}

// Usage is what the watched servers spent during the timed phase.
type Usage struct {
	Pids []int `json:"pids"`
	// CPUSeconds is the user + system CPU time of Pids.
	CPUSeconds float64 `json:"cpu_seconds"`
	// WriteBytes is the bytes Pids caused to be written to storage
	// (/proc/<pid>/io write_bytes less cancelled_write_bytes): theirs
	// alone, counted when written to the page cache.
	WriteBytes int64 `json:"write_bytes"`
	// Device is the block device holding Watch.Dir as /proc/diskstats
	// names it, or "" when Dir is on no block device listed there (then
	// DeviceBytes is 0 and means nothing).
	Device string `json:"device,omitempty"`
	// DeviceBytes is the bytes that reached Device, from its sectors
	// written, with the file system synced (syncfs) at both ends of the
	// phase so that the servers' buffered writes of the phase are in.
	DeviceBytes int64 `json:"device_bytes"`
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 for user space on every architecture Go supports
// (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// sectorBytes is the unit of /proc/diskstats' sector counts, whatever the
// device's own sector size.
const sectorBytes = 512

// usageSample is one reading of the counters Usage is the difference of.
type usageSample struct {
	cpuTicks   int64
	writeBytes int64
	sectors    int64
}

// usageMeter reads the counters of one Watch.
type usageMeter struct {
	w      Watch
	device string // "" when Dir is on no listed block device
	major  uint32
	minor  uint32
}

// newUsageMeter checks that the processes and the directory exist and
// finds the directory's block device.
func newUsageMeter(w Watch) (*usageMeter, error) {
	if len(w.Pids) == 0 {
		return nil, fmt.Errorf("watch: no server pids")
	}
	m := &usageMeter{w: w}
	if w.Dir != "" {
		var st unix.Stat_t
		if err := unix.Stat(w.Dir, &st); err != nil {
			return nil, fmt.Errorf("watch: data directory: %w", err)
		}
		m.major, m.minor = unix.Major(st.Dev), unix.Minor(st.Dev)
		b, err := os.ReadFile("/proc/diskstats")
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		if name, _, ok := findDiskstats(b, m.major, m.minor); ok {
			m.device = name
		}
	}
	if _, err := m.sample(); err != nil {
		return nil, err
	}
	return m, nil
}

// sample syncs the data directory's file system (so that the device has
// the buffered writes made so far) and reads every counter.
func (m *usageMeter) sample() (usageSample, error) {
	var s usageSample
	for _, pid := range m.w.Pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return s, fmt.Errorf("watch: server process %d: %w", pid, err)
		}
		ticks, err := parseCPUTicks(stat)
		if err != nil {
			return s, fmt.Errorf("watch: /proc/%d/stat: %w", pid, err)
		}
		s.cpuTicks += ticks
		ioStat, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			return s, fmt.Errorf("watch: server process %d: %w", pid, err)
		}
		wb, err := parseWriteBytes(ioStat)
		if err != nil {
			return s, fmt.Errorf("watch: /proc/%d/io: %w", pid, err)
		}
		s.writeBytes += wb
	}
	if m.device == "" {
		return s, nil
	}
	if err := syncfs(m.w.Dir); err != nil {
		return s, err
	}
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return s, fmt.Errorf("watch: %w", err)
	}
	_, sectors, ok := findDiskstats(b, m.major, m.minor)
	if !ok {
		return s, fmt.Errorf("watch: device %s left /proc/diskstats", m.device)
	}
	s.sectors = sectors
	return s, nil
}

// usage is what was spent between two samples.
func (m *usageMeter) usage(from, to usageSample) *Usage {
	u := &Usage{
		Pids:       m.w.Pids,
		CPUSeconds: float64(to.cpuTicks-from.cpuTicks) / userHZ,
		WriteBytes: to.writeBytes - from.writeBytes,
		Device:     m.device,
	}
	if m.device != "" {
		u.DeviceBytes = (to.sectors - from.sectors) * sectorBytes
	}
	return u
}

func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("watch: syncfs %s: %w", dir, err)
	}
	return nil
}

// parseCPUTicks returns utime + stime of a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted from the last ')'.
func parseCPUTicks(stat []byte) (int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	// After the name: field 3 (state) onwards; utime and stime are
	// fields 14 and 15.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var sum int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu time %q: %w", s, err)
		}
		sum += v
	}
	return sum, nil
}

// parseWriteBytes returns write_bytes less cancelled_write_bytes (pages
// dirtied and then truncated before they were written) of /proc/<pid>/io.
func parseWriteBytes(ioStat []byte) (int64, error) {
	var wb, cancelled int64
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(ioStat))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "write_bytes" && k != "cancelled_write_bytes") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", k, v, err)
		}
		if k == "write_bytes" {
			wb = n
		} else {
			cancelled = n
		}
		seen++
	}
	if seen != 2 {
		return 0, fmt.Errorf("no write_bytes and cancelled_write_bytes lines")
	}
	return wb - cancelled, nil
}

// findDiskstats finds the device major:minor in /proc/diskstats and
// returns its name and sectors written (field 10).
func findDiskstats(stats []byte, major, minor uint32) (string, int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(stats))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != strconv.FormatUint(uint64(major), 10) || f[1] != strconv.FormatUint(uint64(minor), 10) {
			continue
		}
		sectors, err := strconv.ParseInt(f[9], 10, 64)
		if err != nil {
			return "", 0, false
		}
		return f[2], sectors, true
	}
	return "", 0, false
}
