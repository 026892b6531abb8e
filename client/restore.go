package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// BackupReport is what VerifyBackup found.
type BackupReport struct {
	// Backups are the directories checked: the backup and the chain of
	// bases it builds on, oldest first.
	Backups []string
	// Files and Entries count what was read back.
	Files   int
	Entries uint64
	// Problems lists what is wrong, one line each; empty when the backup
	// is sound.
	Problems []string
}

// VerifyBackup checks the backup in dir and every backup it builds on:
// each manifest against its checksum, each file against the manifest's
// SHA-256, and every entry of every file read back in order. What is wrong
// with the backup is reported in BackupReport.Problems; the error is for
// failures to check at all.
func (c *Client) VerifyBackup(ctx context.Context, dir string, progress func(BackupProgress)) (*BackupReport, error) {
	dirs, ms, err := c.backupChain(ctx, dir)
	if err != nil {
		var e *Error
		if asError(err, &e) && e.kind == ErrInvalidArgument {
			return &BackupReport{Backups: []string{dir}, Problems: []string{e.Msg}}, nil
		}
		return nil, err
	}
	r := &BackupReport{Backups: dirs}
	total, totalBytes := 0, uint64(0)
	for _, m := range ms {
		total += len(m.Files)
		totalBytes += m.DataBytes
	}
	prog := progressClock{phase: "verify", start: time.Now(), fn: progress}
	var doneBytes uint64
	for i, m := range ms {
		for _, f := range m.Files {
			var resp *kvpb.VerifyFileResponse
			sum, _ := hex.DecodeString(f.SHA256)
			err := c.do(ctx, "VerifyBackup", false, func(ctx context.Context, e *endpoint) (err error) {
				resp, err = e.backup.VerifyFile(ctx, &kvpb.VerifyFileRequest{Dir: dirs[i], File: f.Name, Sha256: sum})
				return err
			})
			if err != nil {
				return nil, err
			}
			r.Files++
			r.Entries += resp.GetEntries()
			doneBytes += f.DataBytes
			switch {
			case resp.GetProblem() != "":
				r.Problems = append(r.Problems, fmt.Sprintf("%s/%s: %s", dirs[i], f.Name, resp.GetProblem()))
			case resp.GetEntries() != f.Entries:
				r.Problems = append(r.Problems, fmt.Sprintf("%s/%s: %d entries, the manifest says %d", dirs[i], f.Name, resp.GetEntries(), f.Entries))
			}
			prog.report(r.Files, total, doneBytes, totalBytes, r.Entries)
		}
	}
	return r, nil
}

// RestoreOptions says where a restore writes and how it reports.
type RestoreOptions struct {
	// Progress, when set, is called after each file.
	Progress func(BackupProgress)
}

// ErrBackupCorrupt: a backup failed verification; Restore wrote nothing.
// The error also matches ErrInvalidArgument.
var ErrBackupCorrupt = errors.New("client: backup is corrupt")

// Restore writes the backup in dir (and the chain of backups it builds on,
// oldest first) into the cluster, through ordinary writes, so the cluster
// may have any number of nodes and ranges. It first verifies every file
// (VerifyBackup) and refuses a corrupt backup, and refuses a target span
// that holds any key: a restore goes into a fresh cluster or an empty
// span. Afterwards the span holds exactly what it held at the backup's
// timestamp. A restore that fails part-way leaves the span partly
// written: empty it (DeleteRange) and restore again.
func (c *Client) Restore(ctx context.Context, dir string, opts *RestoreOptions) (*BackupManifest, error) {
	const op = "Restore"
	var o RestoreOptions
	if opts != nil {
		o = *opts
	}
	report, err := c.VerifyBackup(ctx, dir, nil)
	if err != nil {
		return nil, err
	}
	if len(report.Problems) > 0 {
		return nil, &Error{Op: op, Msg: fmt.Sprintf("backup %s failed verification; nothing restored: %s", dir, report.Problems[0]),
			kind: ErrInvalidArgument, cause: ErrBackupCorrupt}
	}
	dirs, ms, err := c.backupChain(ctx, dir)
	if err != nil {
		return nil, err
	}
	last := ms[len(ms)-1]
	for kv, err := range c.Scan(ctx, last.Start, last.End, &ScanOptions{Limit: 1, KeysOnly: true}) {
		if err != nil {
			return nil, err
		}
		return nil, &Error{Op: op, Msg: fmt.Sprintf("the span [%q, %q) is not empty (key %q): a restore needs an empty span or a fresh cluster",
			last.Start, last.End, kv.Key), kind: ErrInvalidArgument}
	}
	total, totalBytes := 0, uint64(0)
	for _, m := range ms {
		total += len(m.Files)
		totalBytes += m.DataBytes
	}
	prog := progressClock{phase: "restore", start: time.Now(), fn: o.Progress}
	files, entries, done := 0, uint64(0), uint64(0)
	for i, m := range ms {
		for _, f := range m.Files {
			n, err := c.restoreFile(ctx, dirs[i], f)
			if err != nil {
				return nil, err
			}
			files++
			entries += n
			done += f.DataBytes
			prog.report(files, total, done, totalBytes, entries)
		}
	}
	return last, nil
}

// restoreBatchBytes and restoreBatchOps bound one restore write, well
// within the nodes' max_write_bytes and max_batch_ops.
const (
	restoreBatchBytes = 256 << 10
	restoreBatchOps   = 1000
)

// restoreFile streams one file's entries from a node and writes them
// with WriteMany (a batch per range they fall in).
func (c *Client) restoreFile(ctx context.Context, dir string, f BackupFile) (uint64, error) {
	sum, _ := hex.DecodeString(f.SHA256)
	var n uint64
	err := c.do(ctx, "Restore", false, func(ctx context.Context, e *endpoint) error {
		// A retry starts the file again: rewriting what was written is
		// harmless (the same values).
		n = 0
		stream, err := e.backup.ReadEntries(ctx, &kvpb.ReadEntriesRequest{Dir: dir, File: f.Name, Sha256: sum})
		if err != nil {
			return err
		}
		var muts []Mutation
		size := 0
		for {
			msg, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			for _, ent := range msg.GetEntries() {
				if ent.GetDeleted() {
					muts = append(muts, DeleteOp(ent.GetKey()))
				} else {
					muts = append(muts, PutOp(ent.GetKey(), ent.GetValue()))
				}
				n++
				if size += len(ent.GetKey()) + len(ent.GetValue()); size >= restoreBatchBytes || len(muts) >= restoreBatchOps {
					if err := c.WriteMany(ctx, muts...); err != nil {
						return err
					}
					muts, size = muts[:0], 0
				}
			}
		}
		return c.WriteMany(ctx, muts...)
	})
	return n, err
}
