package mvcc

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// BenchmarkScan scans 2,000 keys at the newest timestamp, with each key
// holding 0, 10 or 100 older versions, flushed and compacted into SSTs (the
// versions issue's target: with 10 old versions within 1.5x of none).
// Compare with: go test -run XXX -bench Scan ./mvcc/
func BenchmarkScan(b *testing.B) {
	for _, old := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("old=%d", old), func(b *testing.B) {
			db, err := storage.Open(filepath.Join(b.TempDir(), "db"), &storage.Options{
				SplitVersionSuffix: true, VersionedKeyPrefix: testKeyspace.Prefix,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			const keys = 2000
			value := make([]byte, 100)
			for v := 0; v <= old; v++ {
				batch := storage.NewBatch(0)
				w := testKeyspace.NewWriter(db, batch)
				for i := 0; i < keys; i++ {
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
			// CPU time as well as wall time: on a shared machine the wall
			// time of a scan varies with the neighbours, its CPU time less.
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				kvs, _, err := testKeyspace.Scan(db, nil, nil, hlc.MaxTimestamp, ScanOptions{})
				if err != nil || len(kvs) != keys {
					b.Fatalf("Scan: %d, %v", len(kvs), err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user + system CPU time in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
