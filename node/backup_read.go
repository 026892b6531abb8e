package node

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/shaledb/shale/storage"
)

// readBackupFile calls fn with every entry of the backup file at path, in
// key order, and returns how many there were. The engine reads SSTs only
// as part of a database, so the file is copied into a scratch database
// under scratchDir (ingestion moves the file it is given) and read from
// there; the scratch database is removed afterwards. An entry out of key
// order or with a malformed value is an error.
func readBackupFile(path, scratchDir string, fn func(key, value []byte, deleted bool) error) (uint64, error) {
	if err := os.MkdirAll(scratchDir, 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(scratchDir, "backup-read-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	cp := filepath.Join(tmp, "in.sst")
	if err := copyFile(path, cp); err != nil {
		return 0, err
	}
	db, err := storage.Open(filepath.Join(tmp, "db"), &storage.Options{
		WriteBufferSize: 1 << 20, BlockCacheSize: 1 << 20, ErrorIfExists: true,
	})
	if err != nil {
		return 0, fmt.Errorf("opening a scratch database: %w", err)
	}
	defer db.Close()
	if err := db.Ingest(cp); err != nil {
		return 0, fmt.Errorf("%s is not a readable SST: %w", filepath.Base(path), err)
	}
	it, err := db.NewIter(&storage.IterOptions{})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var n uint64
	var prev []byte
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		if n > 0 && bytes.Compare(prev, k) >= 0 {
			return n, fmt.Errorf("%s: key %q is not above the key before it", filepath.Base(path), k)
		}
		prev = append(prev[:0], k...)
		v, deleted, err := decodeBackupValue(it.UnsafeValue())
		if err != nil {
			return n, fmt.Errorf("%s: key %q: %w", filepath.Base(path), k, err)
		}
		if err := fn(bytes.Clone(k), v, deleted); err != nil {
			return n, err
		}
		n++
	}
	if err := it.Error(); err != nil {
		return n, fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	return n, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
