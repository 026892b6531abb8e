package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// A backup lives in one directory under the nodes' backup directory (the
// nodes' --backup-dir, which every node sees): an SST file per exported
// range and two small files written last, MANIFEST (the JSON below) and
// MANIFEST.sha256 (its SHA-256, hex). A backup without a MANIFEST is
// unfinished. docs/formats.md ("Backups") gives the layout.

const (
	backupManifestName   = "MANIFEST"
	backupChecksumName   = "MANIFEST.sha256"
	backupManifestFormat = 1
)

// BackupManifest describes one backup.
type BackupManifest struct {
	// Format is the manifest's layout version (1).
	Format int `json:"format"`
	// ClusterID names the cluster the backup was taken from.
	ClusterID string `json:"cluster_id,omitempty"`
	// Created is when the backup began.
	Created time.Time `json:"created"`
	// ReadTimestamp is the timestamp every range was read at: the backup
	// holds exactly the cluster's state as of it.
	ReadTimestamp BackupTimestamp `json:"read_timestamp"`
	// Start and End bound the span backed up ([Start, End); empty End: to
	// the end of the key space).
	Start []byte `json:"start"`
	End   []byte `json:"end"`
	// Base, for an incremental backup, is the directory of the backup it
	// builds on, and Since that backup's ReadTimestamp: this one holds the
	// keys written and deleted in (Since, ReadTimestamp].
	Base  string           `json:"base,omitempty"`
	Since *BackupTimestamp `json:"since,omitempty"`
	// Protection, when the backup was taken with KeepProtected, is the
	// protected timestamp that keeps the history at ReadTimestamp for an
	// incremental backup on top of this one (docs/backup.md); release it
	// (shalectl protect release) once no incremental will be taken.
	Protection ProtectionID `json:"protection,omitempty"`
	// Files are the backup's SST files, in key order: one per range part
	// that held entries. A part with none (no key at ReadTimestamp, or for
	// an incremental backup no change since Since) has no file, so the
	// files need not cover the span, and a backup of an empty span, or an
	// incremental one with nothing changed, has none.
	Files []BackupFile `json:"files"`
	// Entries, DataBytes and Bytes total the files'.
	Entries   uint64 `json:"entries"`
	DataBytes uint64 `json:"data_bytes"`
	Bytes     uint64 `json:"bytes"`
}

// BackupFile is one SST file of a backup: the entries of one range's part
// of the span.
type BackupFile struct {
	Name    string `json:"name"`
	RangeID uint64 `json:"range_id"`
	Start   []byte `json:"start"`
	End     []byte `json:"end"`
	Entries uint64 `json:"entries"`
	// DataBytes counts keys and values; Bytes is the file's size.
	DataBytes uint64 `json:"data_bytes"`
	Bytes     uint64 `json:"bytes"`
	SHA256    string `json:"sha256"`
}

// BackupTimestamp is a version timestamp as a manifest records it.
type BackupTimestamp struct {
	WallNanos int64  `json:"wall_nanos"`
	Logical   uint32 `json:"logical"`
}

func (t BackupTimestamp) proto() *kvpb.Timestamp {
	return &kvpb.Timestamp{WallNanos: t.WallNanos, Logical: t.Logical}
}

func backupTimestampOf(t *kvpb.Timestamp) BackupTimestamp {
	return BackupTimestamp{WallNanos: t.GetWallNanos(), Logical: t.GetLogical()}
}

// Timestamp is t as the client's Timestamp (for AtTimestamp).
func (t BackupTimestamp) Timestamp() Timestamp {
	return Timestamp{WallTime: t.WallNanos, Logical: int32(t.Logical)}
}

// IsZero reports whether t is unset.
func (t BackupTimestamp) IsZero() bool { return t == BackupTimestamp{} }

// Time is t's wall time.
func (t BackupTimestamp) Time() time.Time { return time.Unix(0, t.WallNanos).UTC() }

// String formats t as FormatTimestamp does, a form --at accepts.
func (t BackupTimestamp) String() string { return FormatTimestamp(t.Timestamp()) }

// encodeManifest returns the manifest file and its checksum file.
func encodeManifest(m *BackupManifest) (manifest, checksum []byte, err error) {
	manifest, err = json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	manifest = append(manifest, '\n')
	sum := sha256.Sum256(manifest)
	return manifest, []byte(hex.EncodeToString(sum[:]) + "\n"), nil
}

// DecodeBackupManifest checks a backup's MANIFEST against the contents of
// its MANIFEST.sha256 and decodes it (for tools that read a backup
// directory themselves).
func DecodeBackupManifest(dir string, manifest, checksum []byte) (*BackupManifest, error) {
	return decodeManifest(dir, manifest, checksum)
}

// decodeManifest checks the manifest against its checksum and decodes it.
func decodeManifest(dir string, manifest, checksum []byte) (*BackupManifest, error) {
	sum := sha256.Sum256(manifest)
	if strings.TrimSpace(string(checksum)) != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("backup %s: %s does not match %s: the manifest is corrupt", dir, backupManifestName, backupChecksumName)
	}
	var m BackupManifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("backup %s: %s: %w", dir, backupManifestName, err)
	}
	if m.Format != backupManifestFormat {
		return nil, fmt.Errorf("backup %s: manifest format %d; this client reads format %d", dir, m.Format, backupManifestFormat)
	}
	return &m, nil
}

// readManifest reads and checks the manifest of the backup in dir.
func (c *Client) readManifest(ctx context.Context, dir string) (*BackupManifest, error) {
	read := func(file string) ([]byte, error) {
		var resp *kvpb.ReadFileResponse
		err := c.do(ctx, "Backup", false, func(ctx context.Context, e *endpoint) (err error) {
			resp, err = e.backup.ReadFile(ctx, &kvpb.ReadFileRequest{Dir: dir, File: file})
			return err
		})
		return resp.GetData(), err
	}
	manifest, err := read(backupManifestName)
	if err != nil {
		return nil, err
	}
	checksum, err := read(backupChecksumName)
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(dir, manifest, checksum)
	if err != nil {
		return nil, &Error{Op: "Backup", Msg: err.Error(), kind: ErrInvalidArgument}
	}
	return m, nil
}

// backupChain returns the backups that restoring dir applies, oldest (the
// full backup) first.
func (c *Client) backupChain(ctx context.Context, dir string) ([]string, []*BackupManifest, error) {
	var dirs []string
	var ms []*BackupManifest
	seen := map[string]bool{}
	for d := dir; d != ""; {
		if seen[d] {
			return nil, nil, &Error{Op: "Restore", Msg: fmt.Sprintf("backup %s: its chain of bases loops at %s", dir, d), kind: ErrInvalidArgument}
		}
		seen[d] = true
		m, err := c.readManifest(ctx, d)
		if err != nil {
			return nil, nil, err
		}
		dirs = append([]string{d}, dirs...)
		ms = append([]*BackupManifest{m}, ms...)
		d = m.Base
	}
	return dirs, ms, nil
}
