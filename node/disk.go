package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/diskspace"
	"github.com/shaledb/shale/storage"
)

// A full disk (docs/operations.md, "A full disk"; docs/durability.md).
//
// The node watches its data directory's free space (internal/diskspace)
// with a reserve of Config.DiskReserveBytes: below it, the node is full.
// A full node refuses client writes before they are proposed, with
// ResourceExhausted naming the node and the directory (definite: not
// applied), keeps serving reads, takes no new data from its peers
// (raft/diskfull.go), and says so in Status (shalectl status) and the
// metrics. The disk loop reads the space every diskCheckInterval and
// resumes the engine once there is room again, so writes come back by
// themselves.

// diskCheckInterval is how often the disk loop reads the free space.
const diskCheckInterval = 500 * time.Millisecond

// openDisk starts watching dir's file system; nodeID may still be 0 (a
// first start): errors name the node once it is known.
func openDisk(dir string, reserve, nodeID uint64) (*diskspace.Monitor, error) {
	m, err := diskspace.Open(diskspace.Config{Dir: dir, ReserveBytes: reserve, NodeID: nodeID})
	if err != nil {
		return nil, fmt.Errorf("node: watching the disk of %s: %w", dir, err)
	}
	return m, nil
}

// openEngine opens the engine; on a disk too full to open it (a new WAL,
// a MANIFEST record) it releases the disk reserve and tries once more, so
// that a node restarted on a full disk comes up, read-only.
func openEngine(dir string, opts *storage.Options, disk *diskspace.Monitor) (*storage.DB, error) {
	db, err := storage.Open(dir, opts)
	if err != nil && errors.Is(err, storage.ErrNoSpace) && disk.NoteNoSpace(err) {
		db, err = storage.Open(dir, opts)
	}
	return db, err
}

// diskLoop reads the free space every diskCheckInterval until the node
// stops, logs changes of state, and resumes the engine once the disk has
// room after an ENOSPC stopped its writes.
func (n *Node) diskLoop() {
	defer n.bgWG.Done()
	if !n.disk.Enabled() {
		return
	}
	t := time.NewTicker(diskCheckInterval)
	defer t.Stop()
	wasFull := false
	var lastShed time.Time
	for {
		if err := n.disk.Check(); err != nil {
			n.log.Warn("reading the disk's free space", "err", err)
		}
		ds := n.disk.Status()
		switch {
		case ds.Full && !wasFull:
			n.log.Error("disk full: refusing writes until space returns", "dir", n.cfg.DataDir,
				"reason", ds.Reason, "available_bytes", ds.AvailableBytes, "reserve_bytes", ds.ReserveBytes)
		case !ds.Full && wasFull:
			n.log.Info("disk space is back: accepting writes again", "dir", n.cfg.DataDir, "available_bytes", ds.AvailableBytes)
		}
		wasFull = ds.Full
		if !ds.Full {
			n.resumeEngineAfterNoSpace()
		} else if time.Since(ds.Since) >= diskShedAfter && time.Since(lastShed) >= diskShedInterval {
			n.shedLeadership(n.bgCtx) // disk_leadership.go
			lastShed = time.Now()
		}
		select {
		case <-n.bgCtx.Done():
			return
		case <-t.C:
		}
	}
}

// resumeEngineAfterNoSpace clears an engine background error left by a
// full disk (a flush or compaction that found no room), now that there is
// room. Other background errors are left for the operator.
func (n *Node) resumeEngineAfterNoSpace() {
	st, err := n.db.Stats()
	if err != nil || !errors.Is(st.BackgroundError, storage.ErrNoSpace) {
		return
	}
	if err := n.db.Resume(); err != nil {
		n.log.Warn("resuming the engine after a full disk", "err", err)
		return
	}
	n.log.Info("engine resumed after a full disk")
}

// diskFullError is the status of a write refused on a full disk, or nil.
func (n *Node) diskFullError(op string) error {
	err := n.disk.Err()
	if err == nil {
		return nil
	}
	return status.Errorf(codes.ResourceExhausted, "%s: %v; the write was not applied", op, err)
}

// diskStatus is the disk part of Status.
func (n *Node) diskStatus() *kvpb.NodeDisk {
	if !n.disk.Enabled() {
		return &kvpb.NodeDisk{DataDir: n.cfg.DataDir}
	}
	ds := n.disk.Status()
	d := &kvpb.NodeDisk{
		Full: ds.Full, Reason: ds.Reason,
		AvailableBytes: ds.AvailableBytes, TotalBytes: ds.TotalBytes,
		ReserveBytes: ds.ReserveBytes, ReserveFileBytes: ds.BallastBytes,
		DataDir: n.cfg.DataDir,
	}
	if ds.Full {
		d.FullSinceUnixNanos = ds.Since.UnixNano()
	}
	return d
}

// diskCollector exports the disk monitor's view, read at scrape time.
type diskCollector struct{ n *Node }

var (
	diskFullDesc      = prometheus.NewDesc("shale_disk_full", "1 while the node's disk is full and it refuses writes (available space below the reserve, or a write found no space), else 0.", nil, nil)
	diskAvailableDesc = prometheus.NewDesc("shale_disk_available_bytes", "Available bytes of the data directory's file system, as last read.", nil, nil)
	diskTotalDesc     = prometheus.NewDesc("shale_disk_total_bytes", "Size of the data directory's file system.", nil, nil)
	diskReserveDesc   = prometheus.NewDesc("shale_disk_reserve_bytes", "The disk reserve: writes are refused below this much available space (--disk-reserve).", nil, nil)
	diskReserveFile   = prometheus.NewDesc("shale_disk_reserve_file_bytes", "Bytes the reserve file holds now; 0 after a write that found the disk full released it.", nil, nil)
)

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{diskFullDesc, diskAvailableDesc, diskTotalDesc, diskReserveDesc, diskReserveFile} {
		ch <- d
	}
}

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	ds := c.n.disk.Status()
	full := 0.0
	if ds.Full {
		full = 1
	}
	ch <- prometheus.MustNewConstMetric(diskFullDesc, prometheus.GaugeValue, full)
	ch <- prometheus.MustNewConstMetric(diskAvailableDesc, prometheus.GaugeValue, float64(ds.AvailableBytes))
	ch <- prometheus.MustNewConstMetric(diskTotalDesc, prometheus.GaugeValue, float64(ds.TotalBytes))
	ch <- prometheus.MustNewConstMetric(diskReserveDesc, prometheus.GaugeValue, float64(ds.ReserveBytes))
	ch <- prometheus.MustNewConstMetric(diskReserveFile, prometheus.GaugeValue, float64(ds.BallastBytes))
}
