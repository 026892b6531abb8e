package rangesm_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// BenchmarkReaderScan scans 2,000 keys of 100-byte values holding 0 or 10
// old versions each, forward and in reverse, at the newest timestamp. Its
// allocations per scan show the old versions' cost without a timer (the
// machine is shared): run it with -benchmem, or count instructions.
func BenchmarkReaderScan(b *testing.B) {
	for _, old := range []int{0, 10} {
		db, err := storage.Open(filepath.Join(b.TempDir(), "db"), keys.WithUserVersions(nil))
		if err != nil {
			b.Fatal(err)
		}
		const n = 2000
		value := make([]byte, 100)
		for v := 0; v <= old; v++ {
			batch := storage.NewBatch(0)
			w := keys.UserKeyspace.NewWriter(db, batch)
			for i := 0; i < n; i++ {
				if err := w.Put([]byte(fmt.Sprintf("key%08d", i)), hlc.Timestamp{WallTime: int64(v + 1)}, value); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Write(batch, storage.NoSync); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.CompactRange(nil, nil); err != nil {
			b.Fatal(err)
		}
		r := rangesm.NewReader(db)
		for _, reverse := range []bool{false, true} {
			b.Run(fmt.Sprintf("old=%d/reverse=%v", old, reverse), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					page, err := r.Scan(rangesm.ScanOptions{Timestamp: hlc.MaxTimestamp, Reverse: reverse, Limit: n + 1, MaxBytes: 1 << 30})
					if err != nil || len(page.Kvs) != n {
						b.Fatalf("Scan: %d, %v", len(page.Kvs), err)
					}
				}
			})
		}
		db.Close()
	}
}
