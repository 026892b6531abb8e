// Package diskspace watches the free space of a node's data directory and
// keeps a reserve for recovering from a full disk (docs/durability.md,
// "A full disk").
//
// The reserve is two things of the same size:
//
//   - a threshold: once the file system's available space drops below it,
//     the node is full and refuses new writes, while writes already in
//     flight (log appends, applies, flushes) still find room;
//   - a ballast file (ReserveFileName) holding that much space: when the
//     disk fills anyway (another process took the space, or the writes in
//     flight took more than the threshold left), the first engine write
//     that fails with ENOSPC releases it, so the node can finish what it
//     started and keep its engine consistent.
//
// The node leaves the full state by itself once the available space is back
// above the threshold and a released ballast is in place again. (A ballast
// that never fitted, on a file system smaller than twice the reserve, does
// not make the node full; it is created once there is room.) The package uses the
// standard library only (statfs, fallocate).
package diskspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ReserveFileName is the ballast file's name in the watched directory.
const ReserveFileName = "space-reserve"

// Config says what to watch.
type Config struct {
	// Dir is the directory whose file system is watched; the ballast
	// file is created in it.
	Dir string
	// ReserveBytes is both the free-space threshold and the ballast's
	// size. 0 turns the monitor off (never full, no ballast).
	ReserveBytes uint64
	// NodeID names the node in errors (see SetNodeID).
	NodeID uint64
}

// Status is the monitor's view of the disk.
type Status struct {
	// Full: new writes are refused.
	Full bool
	// Reason says why when Full ("available 3.0 MiB below the reserve of
	// 8.0 MiB", "a write failed: no space left on device").
	Reason string
	// Since is when the node became full (zero when not full).
	Since time.Time
	// AvailableBytes and TotalBytes are the file system's, as last seen.
	AvailableBytes uint64
	TotalBytes     uint64
	// ReserveBytes is the threshold; BallastBytes what the ballast file
	// holds now (0 once released).
	ReserveBytes uint64
	BallastBytes uint64
}

// Monitor tracks whether the disk is full. Its methods are safe for
// concurrent use.
type Monitor struct {
	cfg     Config
	ballast string
	nodeID  atomic.Uint64

	mu sync.Mutex
	st Status
	// released: NoteNoSpace gave the ballast up and it is not back yet;
	// the node stays full until it is.
	released bool
	stat     func(dir string) (avail, total uint64, err error)
}

// ErrFull matches every error Err returns.
var ErrFull = errors.New("disk full")

// FullError is a write refused because the node's disk is full.
type FullError struct {
	NodeID uint64
	Dir    string
	Status Status
}

func (e *FullError) Error() string {
	return fmt.Sprintf("node %d: disk full: %s (data directory %s, %s available of %s, reserve %s)",
		e.NodeID, e.Status.Reason, e.Dir, formatBytes(e.Status.AvailableBytes),
		formatBytes(e.Status.TotalBytes), formatBytes(e.Status.ReserveBytes))
}

// Is makes FullError match ErrFull.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// Open starts watching cfg.Dir: it creates the ballast file if it is
// missing and there is room for it, and takes a first reading, so that a
// node started on a full disk is full from the start.
func Open(cfg Config) (*Monitor, error) {
	m := newMonitor(cfg, statfs)
	if cfg.ReserveBytes == 0 {
		// Off: a ballast of an earlier run with a reserve is given back.
		if err := os.Remove(m.ballast); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("diskspace: removing the reserve file: %w", err)
		}
		return m, nil
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// SetNodeID names the node in errors from now on (a node learns its ID
// after it opened its engine on a first start).
func (m *Monitor) SetNodeID(id uint64) {
	if m != nil {
		m.nodeID.Store(id)
	}
}

func newMonitor(cfg Config, stat func(dir string) (avail, total uint64, err error)) *Monitor {
	m := &Monitor{cfg: cfg, ballast: filepath.Join(cfg.Dir, ReserveFileName), stat: stat}
	m.st.ReserveBytes = cfg.ReserveBytes
	m.nodeID.Store(cfg.NodeID)
	return m
}

// Enabled says whether the monitor watches anything.
func (m *Monitor) Enabled() bool { return m != nil && m.cfg.ReserveBytes > 0 }

// Err is nil while writes may go on, else a *FullError. A nil Monitor is
// never full.
func (m *Monitor) Err() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.st.Full {
		return nil
	}
	return &FullError{NodeID: m.nodeID.Load(), Dir: m.cfg.Dir, Status: m.st}
}

// Full says whether new writes are refused.
func (m *Monitor) Full() bool { return m.Err() != nil }

// Status returns the last reading.
func (m *Monitor) Status() Status {
	if m == nil {
		return Status{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// NoteNoSpace records that a write failed for lack of space: the node is
// full from now on, and the ballast is released so that the writes the
// node must finish find room. It returns true if the ballast was released
// now (the caller may retry at once).
func (m *Monitor) NoteNoSpace(cause error) bool {
	if !m.Enabled() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setFullLocked("a write failed: " + cause.Error())
	if m.st.BallastBytes == 0 {
		return false
	}
	if err := os.Remove(m.ballast); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false
	}
	m.st.BallastBytes = 0
	m.released = true
	return true
}

// Check reads the file system's space now and updates the state: the
// ballast is re-created once there is room for it, and the node leaves
// the full state once the available space is above the threshold again
// with the ballast in place.
func (m *Monitor) Check() error {
	if !m.Enabled() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	avail, total, err := m.stat(m.cfg.Dir)
	if err != nil {
		return fmt.Errorf("diskspace: reading the free space of %s: %w", m.cfg.Dir, err)
	}
	if m.st.BallastBytes < m.cfg.ReserveBytes {
		m.st.BallastBytes = m.ballastSize()
	}
	if m.st.BallastBytes < m.cfg.ReserveBytes && avail >= 2*m.cfg.ReserveBytes {
		// Room for the ballast and the threshold above it: take the
		// ballast back first, so the node never runs without it.
		if err := m.createBallast(); err == nil {
			m.st.BallastBytes = m.cfg.ReserveBytes
			m.released = false
			if avail, total, err = m.stat(m.cfg.Dir); err != nil {
				return fmt.Errorf("diskspace: reading the free space of %s: %w", m.cfg.Dir, err)
			}
		}
	}
	m.st.AvailableBytes, m.st.TotalBytes = avail, total
	switch {
	case avail < m.cfg.ReserveBytes:
		m.setFullLocked(fmt.Sprintf("available %s below the reserve of %s", formatBytes(avail), formatBytes(m.cfg.ReserveBytes)))
	case m.released:
		m.setFullLocked(fmt.Sprintf("the reserve file is not back yet (%s of %s)", formatBytes(m.st.BallastBytes), formatBytes(m.cfg.ReserveBytes)))
	default:
		m.st.Full, m.st.Reason, m.st.Since = false, "", time.Time{}
	}
	return nil
}

// Run checks every interval until stop is closed.
func (m *Monitor) Run(interval time.Duration, stop <-chan struct{}, onErr func(error)) {
	if !m.Enabled() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := m.Check(); err != nil && onErr != nil {
				onErr(err)
			}
		}
	}
}

// setFullLocked enters (or stays in) the full state with reason.
// REQUIRES: mu.
func (m *Monitor) setFullLocked(reason string) {
	if !m.st.Full {
		m.st.Since = time.Now()
	}
	m.st.Full, m.st.Reason = true, reason
}

// ballastSize is the ballast file's allocated size (0 if it is missing).
func (m *Monitor) ballastSize() uint64 {
	fi, err := os.Stat(m.ballast)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Blocks) * 512
	}
	return uint64(fi.Size())
}

// createBallast allocates the ballast file in full (a sparse file would
// hold no space), replacing any partial one.
func (m *Monitor) createBallast() error {
	tmp := m.ballast + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	size := int64(m.cfg.ReserveBytes)
	err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		err = writeZeros(f, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, m.ballast)
	}
	if err != nil {
		_ = os.Remove(tmp) // gives back whatever it took
		return err
	}
	return nil
}

func writeZeros(w io.Writer, n int64) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// statfs returns the space available to unprivileged users and the total.
func statfs(dir string) (avail, total uint64, err error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(dir, &s); err != nil {
		return 0, 0, err
	}
	return s.Bavail * uint64(s.Bsize), s.Blocks * uint64(s.Bsize), nil
}

func formatBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
