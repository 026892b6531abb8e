package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// BackupOptions says what Backup copies and how fast.
type BackupOptions struct {
	// Start and End bound the span to back up ([Start, End); both empty:
	// the whole key space).
	Start, End []byte
	// Base names the directory of an earlier backup of the same span to
	// build on: the new backup holds only the keys written or deleted
	// since Base's timestamp. The ranges keep versions only for the
	// retention window (docs/versions.md), so an incremental backup must be
	// taken within it of its base, or while the base's protection
	// (KeepProtected) lasts; otherwise it fails with "history compacted"
	// and a full backup is needed.
	Base string
	// KeepProtected, if above 0, keeps the protected timestamp the backup
	// runs under for that long after it finishes (the manifest's
	// Protection), so that an incremental backup on top of this one can
	// be taken later than the retention window allows; 0 releases it
	// when the backup ends.
	KeepProtected time.Duration
	// ProtectionTTL is the TTL of the protection held while the backup
	// runs, refreshed every third of it (0: DefaultBackupProtectionTTL).
	// If the backup process dies, the protection lapses this long after.
	ProtectionTTL time.Duration
	// BytesPerSecond throttles the export (keys and values per second,
	// averaged over the backup); 0: no limit (the library's zero value;
	// shalectl defaults to DefaultBackupBytesPerSecond and takes --rate 0
	// for no limit). Each range's leader paces
	// its own export page by page (nodes that predate that export a
	// range at full speed), and the client waits between ranges. A range
	// is exported within one attempt (Options.AttemptTimeout; shalectl
	// allows 5 minutes), so the rate must let the largest range finish in
	// it: a 64 MiB range in 5 minutes needs about 220 KB/s. See
	// docs/backup.md for the foreground cost of each setting.
	BytesPerSecond int64
	// Progress, when set, is called after each range is exported.
	Progress func(BackupProgress)
}

// BackupProgress reports how far a backup, a verification or a restore
// has got.
type BackupProgress struct {
	// Phase is "backup", "verify" or "restore".
	Phase string
	// Files counts the files done and FilesTotal how many there are; for
	// a backup, Files counts the range parts exported (a part with nothing
	// to back up writes no file) and FilesTotal the ranges it expects to
	// export, an estimate.
	Files, FilesTotal int
	// Bytes counts the keys' and values' bytes done; BytesTotal estimates
	// the whole (0: unknown).
	Bytes, BytesTotal uint64
	// Entries counts the keys done.
	Entries uint64
	// Elapsed is the time since the start; Rate the bytes per second so
	// far; ETA the estimated time left (0: unknown).
	Elapsed time.Duration
	Rate    float64
	ETA     time.Duration
}

// DefaultBackupProtectionTTL is the TTL of a running backup's protection.
const DefaultBackupProtectionTTL = 2 * time.Minute

// progressClock derives rates and ETAs.
type progressClock struct {
	phase string
	start time.Time
	fn    func(BackupProgress)
}

func (p progressClock) report(files, filesTotal int, bytesDone, bytesTotal, entries uint64) {
	if p.fn == nil {
		return
	}
	el := time.Since(p.start)
	pr := BackupProgress{Phase: p.phase, Files: files, FilesTotal: filesTotal, Bytes: bytesDone, BytesTotal: bytesTotal,
		Entries: entries, Elapsed: el}
	if s := el.Seconds(); s > 0 {
		pr.Rate = float64(bytesDone) / s
	}
	if pr.Rate > 0 && bytesTotal > bytesDone {
		pr.ETA = time.Duration(float64(bytesTotal-bytesDone) / pr.Rate * float64(time.Second))
	}
	p.fn(pr)
}

// Backup writes a consistent backup of a span into dir, a directory
// relative to the nodes' backup directory (each node's --backup-dir, one
// directory that every node sees), while writes go on. Every range is read
// at one timestamp: the first range's read timestamp, which the manifest
// records; the backup equals a consistent scan of the span at that
// timestamp. Each range's leader writes its part as an SST file (none
// for a part with nothing to back up); Backup then writes the manifest.
// dir must not hold a finished backup.
//
// The read timestamp is protected for the run (Protect, refreshed every
// third of ProtectionTTL), so a backup that takes longer than the
// retention window still reads every range; with KeepProtected the
// protection outlives the run.
//
// Backup is resumable only by starting again (a new dir): files of an
// unfinished backup have no manifest and are ignored by Restore.
func (c *Client) Backup(ctx context.Context, dir string, opts *BackupOptions) (*BackupManifest, error) {
	const op = "Backup"
	var o BackupOptions
	if opts != nil {
		o = *opts
	}
	if len(o.End) > 0 && bytes.Compare(o.Start, o.End) >= 0 {
		return nil, &Error{Op: op, Msg: fmt.Sprintf("empty or inverted span [%q, %q)", o.Start, o.End), kind: ErrInvalidArgument}
	}
	if _, err := c.readManifest(ctx, dir); err == nil {
		return nil, &Error{Op: op, Msg: fmt.Sprintf("backup %s already exists; choose a new directory", dir), kind: ErrInvalidArgument}
	} else if !isNotFound(err) {
		return nil, err
	}
	m := &BackupManifest{Format: backupManifestFormat, ClusterID: c.opts.ClusterID, Created: time.Now().UTC(),
		Start: o.Start, End: o.End, Files: []BackupFile{}}
	var since *kvpb.Timestamp
	if o.Base != "" {
		base, err := c.readManifest(ctx, o.Base)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(base.Start, o.Start) || !bytes.Equal(base.End, o.End) {
			return nil, &Error{Op: op, Msg: fmt.Sprintf("base backup %s covers [%q, %q), not [%q, %q): an incremental backup covers its base's span",
				o.Base, base.Start, base.End, o.Start, o.End), kind: ErrInvalidArgument}
		}
		m.Base = o.Base
		ts := base.ReadTimestamp
		m.Since = &ts
		since = ts.proto()
	}
	if o.BytesPerSecond < 0 {
		return nil, &Error{Op: op, Msg: fmt.Sprintf("negative BytesPerSecond (%d)", o.BytesPerSecond), kind: ErrInvalidArgument}
	}
	if o.KeepProtected < 0 || o.ProtectionTTL < 0 {
		return nil, &Error{Op: op, Msg: fmt.Sprintf("negative KeepProtected (%v) or ProtectionTTL (%v)", o.KeepProtected, o.ProtectionTTL), kind: ErrInvalidArgument}
	}
	ttl := o.ProtectionTTL
	if ttl == 0 {
		ttl = DefaultBackupProtectionTTL
	}
	prot, err := c.Protect(ctx, o.Start, o.End, Timestamp{}, ttl, "backup "+dir)
	if err != nil {
		return nil, err
	}
	kept := false
	defer func() {
		if !kept {
			// Best effort: unreleased, it lapses after its TTL.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = c.ReleaseProtection(rctx, prot.ID)
			cancel()
		}
	}()
	stopRefresh := c.refreshWhile(ctx, prot.ID, ttl)
	readTS := toProto(prot.Timestamp)
	m.ReadTimestamp = backupTimestampOf(readTS)
	ranges, total := c.backupEstimate(ctx, o.Start, o.End)
	prog := progressClock{phase: "backup", start: time.Now(), fn: o.Progress}
	parts := 0
	for cur := o.Start; ; {
		// A part with nothing to export writes no file, so files are
		// numbered by the files written, not by the parts.
		f, resp, err := c.exportOne(ctx, dir, len(m.Files), cur, o.End, readTS, since, uint64(o.BytesPerSecond))
		if err != nil {
			stopRefresh()
			return nil, err
		}
		if got := resp.GetHeader().GetReadTimestamp(); got != nil && (got.GetWallNanos() != readTS.GetWallNanos() || got.GetLogical() != readTS.GetLogical()) {
			stopRefresh()
			return nil, &Error{Op: op, Msg: fmt.Sprintf("range %d was read at %v, not at the backup's timestamp %v (a node older than versioned reads?); no consistent backup possible",
				f.RangeID, backupTimestampOf(got), m.ReadTimestamp), kind: ErrInternal}
		}
		if f.Entries > 0 {
			// A part with no entries (no key at the timestamp, or for an
			// incremental backup no change since the base) has no file and
			// no place in the manifest: the files cover the parts of the
			// span that hold something.
			m.Files = append(m.Files, f)
			m.Entries += f.Entries
			m.DataBytes += f.DataBytes
			m.Bytes += f.Bytes
		}
		parts++
		prog.report(parts, max(ranges, parts), m.DataBytes, max(total, m.DataBytes), m.Entries)
		if len(f.End) == 0 || (len(o.End) > 0 && bytes.Compare(f.End, o.End) >= 0) {
			break
		}
		cur = f.End
		if o.BytesPerSecond > 0 {
			// Pace to the average rate: wait until the bytes so far are
			// within budget.
			due := time.Duration(float64(m.DataBytes) / float64(o.BytesPerSecond) * float64(time.Second))
			if !sleep(ctx, due-time.Since(prog.start)) {
				stopRefresh()
				return nil, contextEnded(op, "", ctx.Err())
			}
		}
	}
	stopRefresh()
	if o.KeepProtected > 0 {
		if _, err := c.RefreshProtection(ctx, prot.ID, o.KeepProtected); err != nil {
			return nil, err
		}
		m.Protection = prot.ID
	}
	manifest, checksum, err := encodeManifest(m)
	if err != nil {
		return nil, &Error{Op: op, Msg: err.Error(), kind: ErrInternal}
	}
	if err := c.writeBackupFile(ctx, dir, backupChecksumName, checksum, false); err != nil {
		return nil, err
	}
	// The manifest goes last and only if absent: its presence says the
	// backup is whole.
	if err := c.writeBackupFile(ctx, dir, backupManifestName, manifest, true); err != nil {
		return nil, err
	}
	kept = o.KeepProtected > 0
	return m, nil
}

// refreshWhile refreshes protection id every third of ttl until the
// returned stop is called (which waits for a refresh in flight). A
// refresh that fails is tried again at the next tick: the exports fail
// with ErrHistoryCompacted, never return wrong data, if the protection
// lapses.
func (c *Client) refreshWhile(ctx context.Context, id ProtectionID, ttl time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(max(ttl/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(ctx, ttl/3+time.Second)
			_, _ = c.RefreshProtection(rctx, id, ttl)
			cancel()
		}
	}()
	var once bool
	return func() {
		if !once {
			once = true
			close(done)
			<-exited
		}
	}
}

// exportOne exports the part of [start, end) in the range holding start,
// as file number n of dir; the node writes no file when the part has no
// entries (f.Entries 0).
func (c *Client) exportOne(ctx context.Context, dir string, n int, start, end []byte, readTS, since *kvpb.Timestamp, rate uint64) (BackupFile, *kvpb.ExportRangeResponse, error) {
	var f BackupFile
	var resp *kvpb.ExportRangeResponse
	err := c.routed(ctx, "Backup", false, routeKey{key: start}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		f = BackupFile{Name: fmt.Sprintf("%06d-r%d.sst", n, d.GetRangeId()), RangeID: d.GetRangeId(), Start: start, End: end}
		if de := d.GetEndKey(); len(de) > 0 && (len(end) == 0 || bytes.Compare(de, end) < 0) {
			f.End = de
		}
		h := routeHeader(c.header(false), d)
		h.ReadTimestamp = readTS
		resp, err = e.backup.ExportRange(ctx, &kvpb.ExportRangeRequest{Header: h, StartKey: f.Start, EndKey: f.End,
			Dir: dir, File: f.Name, Since: since, BytesPerSecond: rate})
		return err
	})
	if err != nil {
		return f, nil, err
	}
	f.Entries, f.DataBytes, f.Bytes = resp.GetEntries(), resp.GetDataBytes(), resp.GetBytes()
	f.SHA256 = hex.EncodeToString(resp.GetSha256())
	return f, resp, nil
}

// backupEstimate returns how many ranges overlap the span and their
// approximate bytes, for progress; zeros when the cluster cannot say.
func (c *Client) backupEstimate(ctx context.Context, start, end []byte) (int, uint64) {
	rs, err := c.RangeList(ctx)
	if err != nil {
		return 0, 0
	}
	n, total := 0, uint64(0)
	for _, r := range rs {
		d := r.Descriptor
		if (len(end) == 0 || bytes.Compare(d.GetStartKey(), end) < 0) && (len(d.GetEndKey()) == 0 || bytes.Compare(start, d.GetEndKey()) < 0) {
			n++
			total += r.ApproximateBytes
		}
	}
	return n, total
}

func (c *Client) writeBackupFile(ctx context.Context, dir, file string, data []byte, exclusive bool) error {
	return c.do(ctx, "Backup", true, func(ctx context.Context, e *endpoint) error {
		_, err := e.backup.WriteFile(ctx, &kvpb.WriteFileRequest{Dir: dir, File: file, Data: data, Exclusive: exclusive})
		return err
	})
}

func isNotFound(err error) bool {
	var e *Error
	return asError(err, &e) && e.kind == ErrNotFound
}
