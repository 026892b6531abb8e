package node

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The files of backups live under the node's backup directory
// (Config.BackupDir): requests name a directory relative to it and a file
// name in that directory, never an absolute path, so a client can reach
// nothing else on the node's disk.

// backupPath resolves dir/file under the node's backup directory.
func (n *Node) backupPath(op, dir, file string) (string, error) {
	root := n.cfg.BackupDir
	if root == "" {
		return "", status.Errorf(codes.FailedPrecondition,
			"%s: node %d has no backup directory; start every node with --backup-dir (a directory all nodes share)", op, n.ident.NodeID)
	}
	if dir == "" || !filepath.IsLocal(dir) {
		return "", status.Errorf(codes.InvalidArgument, "%s: backup directory %q must be a relative path inside the nodes' backup directory", op, dir)
	}
	if file == "" {
		return "", status.Errorf(codes.InvalidArgument, "%s: no file name", op)
	}
	if strings.ContainsAny(file, `/\`) || !filepath.IsLocal(file) || strings.HasPrefix(file, ".") {
		return "", status.Errorf(codes.InvalidArgument, "%s: backup file name %q must be a plain file name", op, file)
	}
	return filepath.Join(root, dir, file), nil
}

// newBackupFile resolves dir/file as backupPath does, creates its
// directory, and returns the path and the temporary name to write it
// under before installFile.
func (n *Node) newBackupFile(op, dir, file string) (path, tmp string, err error) {
	if path, err = n.backupPath(op, dir, file); err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", "", fileError(op, err)
	}
	return path, tempName(path), nil
}

// tempName returns a name next to path for a file being written; it starts
// with a dot, so no request can name it.
func tempName(path string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-"+hex.EncodeToString(b[:]))
}

// installFile renames the finished, synced tmp to path (refusing to
// replace an existing file when exclusive) and syncs the directory, so the
// file is either whole under its name or absent.
func installFile(tmp, path string, exclusive bool) error {
	if exclusive {
		// A hard link fails if path exists: an atomic create-if-absent.
		if err := os.Link(tmp, path); err != nil {
			os.Remove(tmp)
			return err
		}
		os.Remove(tmp)
	} else if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// fileDigest returns the SHA-256 and size of the file at path.
func fileDigest(path string) ([]byte, uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	return h.Sum(nil), uint64(size), nil
}

// fileError maps a file-system failure of a backup request.
func fileError(op string, err error) error {
	switch {
	case os.IsNotExist(err):
		return status.Errorf(codes.NotFound, "%s: %v", op, err)
	case os.IsExist(err):
		return status.Errorf(codes.AlreadyExists, "%s: %v", op, err)
	case os.IsPermission(err):
		return status.Errorf(codes.PermissionDenied, "%s: %v", op, err)
	}
	return status.Errorf(codes.Internal, "%s: %v", op, err)
}

// exportWritebackBytes is how many bytes an export adds to its file
// between two requests to the kernel to start writing the file out.
const exportWritebackBytes = 1 << 20

// writeback has the kernel write a file's dirty pages out as the file
// grows, without waiting for them (sync_file_range, as RocksDB's
// bytes_per_sync does), so that the file's final fsync finds little left
// to write. Without it an export's file stays in the page cache until that
// fsync: up to a whole range (64 MiB) flushed in one burst, on the disk
// that holds the node's Raft log, whose fsyncs then wait behind it (and a
// log fsync stuck that long is the disk stall that moves the node's
// leaderships away: raft/diskstall.go). It is advice: a failure to start
// writeback changes nothing, and durability still comes from the fsync.
// A nil writeback does nothing.
type writeback struct {
	f       *os.File
	pending int
}

// openWriteback opens path for writeback, or returns nil if it cannot.
func openWriteback(path string) *writeback {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return &writeback{f: f}
}

// add counts n bytes written to the file, and starts writeback once
// exportWritebackBytes have accumulated.
func (wb *writeback) add(n int) {
	if wb == nil {
		return
	}
	if wb.pending += n; wb.pending >= exportWritebackBytes {
		wb.pending = 0
		_ = unix.SyncFileRange(int(wb.f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}
}

func (wb *writeback) close() {
	if wb != nil {
		wb.f.Close()
	}
}
