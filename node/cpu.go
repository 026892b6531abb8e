package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaledb/shale/api/kvpb"
)

// CPU use of the node's host and process, for load splits (splitter.go)
// and for operators (Admin.Status, Admin.Nodes, the host CPU gauge).
//
// A sampler reads the host's cumulative CPU times (/proc/stat) and the
// process's (getrusage) once per cpuSampleEvery and keeps the readings of
// the last cpuWindow; a caller gets the use from the oldest of them to
// the moment it asks (stats), without resetting anybody else's window.

const (
	cpuSampleEvery = time.Second
	// cpuWindow matches the split check's default interval, the window
	// over which a range's load is measured.
	cpuWindow = 10 * time.Second
)

// cpuReading is one sample of cumulative CPU times.
type cpuReading struct {
	at        time.Time
	hostBusy  uint64 // jiffies not idle nor waiting for I/O, all CPUs
	hostTotal uint64 // all jiffies, all CPUs
	process   time.Duration
	// cgLimit is the node's cgroup CPU quota in CPUs (0: none), cgUsage
	// the cgroup's cumulative CPU time (cpu_cgroup.go).
	cgLimit float64
	cgUsage time.Duration
}

type cpuSampler struct {
	statPath string // /proc/stat; a test points it elsewhere
	cgroup   string // the node's cgroup v2 directory, "" if none

	mu       sync.Mutex
	readings []cpuReading // oldest first; the second is under cpuWindow old
	err      error        // the last reading's failure, if it failed
}

// newCPUSampler takes the first reading at once, so that stats has a
// window from the node's start on. A cgroup whose quota cannot be read
// at start is left out (logged): the host's figures still count.
func newCPUSampler(log *slog.Logger) *cpuSampler {
	s := &cpuSampler{statPath: "/proc/stat"}
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		s.cgroup = cgroupDirFor(data, "/sys/fs/cgroup")
	}
	if s.cgroup != "" {
		if _, _, err := readCgroupCPU(s.cgroup); err != nil {
			log.Warn("cannot read this node's cgroup CPU quota; load splits judge the host's CPU alone", "err", err)
			s.cgroup = ""
		}
	}
	s.sample(time.Now())
	return s
}

// run samples until ctx is done.
func (s *cpuSampler) run(ctx context.Context) {
	t := time.NewTicker(cpuSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

// sample takes one reading and drops those older than the window.
func (s *cpuSampler) sample(now time.Time) {
	r, err := s.read(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	if err != nil {
		return
	}
	s.readings = append(s.readings, r)
	drop := 0
	for drop < len(s.readings)-2 && now.Sub(s.readings[drop+1].at) >= cpuWindow {
		drop++
	}
	s.readings = append(s.readings[:0], s.readings[drop:]...)
}

func (s *cpuSampler) read(now time.Time) (cpuReading, error) {
	data, err := os.ReadFile(s.statPath)
	if err != nil {
		return cpuReading{}, fmt.Errorf("reading host CPU times: %w", err)
	}
	busy, total, err := parseProcStatCPU(data)
	if err != nil {
		return cpuReading{}, fmt.Errorf("%s: %w", s.statPath, err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuReading{}, fmt.Errorf("reading process CPU time: %w", err)
	}
	proc := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	r := cpuReading{at: now, hostBusy: busy, hostTotal: total, process: proc}
	if s.cgroup != "" {
		if r.cgLimit, r.cgUsage, err = readCgroupCPU(s.cgroup); err != nil {
			return cpuReading{}, err
		}
	}
	return r, nil
}

// stats is the CPU use over the readings kept (about cpuWindow) and a
// reading taken now. The host's use is the median of its use in each
// interval between readings (about a second each), so that a few seconds
// of a different load at one end of the window (a node just started, a
// load just begun) do not decide it; in an interval where the node's
// cgroup has a CPU quota, the use is the greater of the host's and the
// quota's share used. The process's use is its mean.
// Unknown if the CPU times cannot be read or no interval is measured yet.
func (s *cpuSampler) stats() *kvpb.NodeCPU {
	now, err := s.read(time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.err != nil || len(s.readings) == 0 {
		return &kvpb.NodeCPU{}
	}
	pts := s.readings
	if now.at.Sub(pts[len(pts)-1].at) >= cpuSampleEvery/2 {
		pts = append(pts[:len(pts):len(pts)], now)
	}
	var busy []float64
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if b.hostTotal <= a.hostTotal {
			continue
		}
		f := float64(b.hostBusy-a.hostBusy) / float64(b.hostTotal-a.hostTotal)
		// Under a quota, the share of it used counts too.
		if secs := b.at.Sub(a.at).Seconds(); a.cgLimit > 0 && b.cgLimit > 0 && secs > 0 {
			f = max(f, min(1, (b.cgUsage-a.cgUsage).Seconds()/(b.cgLimit*secs)))
		}
		busy = append(busy, f)
	}
	first, last := pts[0], pts[len(pts)-1]
	secs := last.at.Sub(first.at).Seconds()
	if len(busy) == 0 || secs <= 0 {
		return &kvpb.NodeCPU{}
	}
	slices.Sort(busy)
	med := busy[len(busy)/2]
	if len(busy)%2 == 0 {
		med = (busy[len(busy)/2-1] + med) / 2
	}
	return &kvpb.NodeCPU{
		Known:         true,
		HostBusy:      med,
		ProcessCores:  (last.process - first.process).Seconds() / secs,
		HostCpus:      uint32(runtime.NumCPU()),
		WindowSeconds: secs,
	}
}

var errNoCPULine = errors.New(`no "cpu " line`)

// parseProcStatCPU reads the aggregate "cpu" line of /proc/stat: user,
// nice, system, idle, iowait, irq, softirq, steal (guest time is already
// counted in user and nice). It returns the jiffies spent neither idle
// nor waiting for I/O, and all jiffies.
func parseProcStatCPU(data []byte) (busy, total uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 || string(f[0]) != "cpu" {
			continue
		}
		var idle uint64
		for i, field := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseUint(string(field), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("cpu line field %d: %w", i+1, err)
			}
			total += v
			if i == 3 || i == 4 { // idle, iowait
				idle += v
			}
		}
		return total - idle, total, nil
	}
	return 0, 0, errNoCPULine
}

// cpuCollector exports the host's CPU use over the sampler's window.
type cpuCollector struct{ n *Node }

var hostCPUBusy = prometheus.NewDesc("shale_node_host_cpu_busy_ratio",
	"Fraction of the host's CPU time, all CPUs, not idle: the median over the seconds of the last 10 s (NaN until measured).", nil, nil)

func (c *cpuCollector) Describe(ch chan<- *prometheus.Desc) { ch <- hostCPUBusy }

// Collect exports NaN while the use is unknown (no clock tick since the
// start, or no /proc/stat), so that the series is always there.
func (c *cpuCollector) Collect(ch chan<- prometheus.Metric) {
	v := math.NaN()
	if st := c.n.cpu.stats(); st.GetKnown() {
		v = st.GetHostBusy()
	}
	ch <- prometheus.MustNewConstMetric(hostCPUBusy, prometheus.GaugeValue, v)
}
