package mvcc

import (
	"fmt"
	"math/rand/v2"
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

// BenchmarkGet reads one key at the newest timestamp per operation, keys
// present and absent, through the versioned point read that consults the
// Bloom filters ("prefix") and through an iterator seek ("iterator", what
// Get did before). The database has the shape of a live LSM: 100,000 keys
// (the even ones of 0..200,000; the odd ones are the absent keys) with
// 100-byte values compacted to the bottom, then newer versions of two
// random tenths of the keys in two L0 files above them. Run with:
// go test -run XXX -bench 'Get$' ./mvcc/
func BenchmarkGet(b *testing.B) {
	db, err := storage.Open(filepath.Join(b.TempDir(), "db"), &storage.Options{
		SplitVersionSuffix: true, VersionedKeyPrefix: testKeyspace.Prefix,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const keys = 100_000
	value := make([]byte, 100)
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%08d", i)) }
	write := func(ts int64, pick func(i int) bool) {
		batch := storage.NewBatch(0)
		w := testKeyspace.NewWriter(db, batch)
		for i := 0; i < keys; i++ {
			if !pick(i) {
				continue
			}
			if err := w.Put(key(2*i), hlc.Timestamp{WallTime: ts}, value); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Write(batch, storage.NoSync); err != nil {
			b.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	write(1, func(int) bool { return true })
	if err := db.CompactRange(nil, nil); err != nil {
		b.Fatal(err)
	}
	write(2, func(i int) bool { return i%10 == 3 })
	write(3, func(i int) bool { return i%10 == 7 })

	readers := []struct {
		name string
		r    Reader
	}{{"prefix", db}, {"iterator", iterOnly{db}}}
	for _, present := range []bool{true, false} {
		for _, rd := range readers {
			name := "absent/" + rd.name
			if present {
				name = "present/" + rd.name
			}
			b.Run(name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				cpu0 := cpuTime(b)
				b.ResetTimer()
				for n := 0; n < b.N; n++ {
					i := 2 * rng.IntN(keys)
					if !present {
						i++
					}
					_, found, err := testKeyspace.Get(rd.r, key(i), hlc.MaxTimestamp)
					if err != nil || found != present {
						b.Fatalf("Get(%d) = %v, %v", i, found, err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkWriterPutRound: one round of 16 puts of existing keys (a range
// applying a round of client writes); each put reads its key's newest
// version (the version that created the key, the stats, the watch feed's
// previous value). The database: 20,000 keys with 100-byte values
// compacted to the bottom and a newer version of a tenth of them in an L0
// file. Instructions per round, without the setup (writerRound is the
// only function counted; docs/put-cost.md):
//
//	go test -c -o mvcc.test ./mvcc/
//	GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind \
//	  --toggle-collect='*mvcc.writerRound' \
//	  ./mvcc.test -test.run XXX -test.bench WriterPutRound -test.benchtime 200x
func BenchmarkWriterPutRound(b *testing.B) {
	db, err := storage.Open(filepath.Join(b.TempDir(), "db"), &storage.Options{
		SplitVersionSuffix: true, VersionedKeyPrefix: testKeyspace.Prefix,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const keys, round = 20_000, 16
	value := make([]byte, 100)
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%08d", i)) }
	write := func(ts int64, pick func(i int) bool) {
		batch := storage.NewBatch(0)
		w := testKeyspace.NewWriter(db, batch)
		for i := 0; i < keys; i++ {
			if pick(i) {
				if err := w.Put(key(i), hlc.Timestamp{WallTime: ts}, value); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := db.Write(batch, storage.NoSync); err != nil {
			b.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	write(1, func(int) bool { return true })
	if err := db.CompactRange(nil, nil); err != nil {
		b.Fatal(err)
	}
	write(2, func(i int) bool { return i%10 == 3 })
	ks := make([][]byte, round)
	seq := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ks {
			seq = (seq + 7919) % keys
			ks[j] = key(seq)
		}
		if err := writerRound(db, ks, value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriterPutRoundMemtable is BenchmarkWriterPutRound with every
// version still in the memtable, as in the cluster benchmarks of
// docs/benchmarks.md (100,000 keys never fill a memtable: a node reads no
// block there), beside range tombstones outside the keyspace like the
// Raft log's truncations. Counted the same way, with
// -test.bench 'WriterPutRoundMemtable$'.
func BenchmarkWriterPutRoundMemtable(b *testing.B) {
	benchmarkWriterPutRoundMemtable(b, false)
}

// BenchmarkWriterPutRoundMemtableNew is BenchmarkWriterPutRoundMemtable
// writing keys that have no version yet, as most puts of the cluster
// benchmarks do (random keys): the read of the newest version finds
// nothing. Counted the same way, with -test.bench WriterPutRoundMemtableNew.
func BenchmarkWriterPutRoundMemtableNew(b *testing.B) {
	benchmarkWriterPutRoundMemtable(b, true)
}

func benchmarkWriterPutRoundMemtable(b *testing.B, newKeys bool) {
	db, err := storage.Open(filepath.Join(b.TempDir(), "db"), &storage.Options{
		SplitVersionSuffix: true, VersionedKeyPrefix: testKeyspace.Prefix,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const keys, round = 20_000, 16
	value := make([]byte, 100)
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%08d", i)) }
	batch := storage.NewBatch(0)
	w := testKeyspace.NewWriter(db, batch)
	for i := 0; i < keys; i++ {
		if err := w.Put(key(i), hlc.Timestamp{WallTime: 1}, value); err != nil {
			b.Fatal(err)
		}
		if i%100 == 99 {
			// A truncation of a log below the keyspace's prefix.
			batch.DeleteRange([]byte(fmt.Sprintf("\x01log%08d", i-99)), []byte(fmt.Sprintf("\x01log%08d", i)))
		}
	}
	if err := db.Write(batch, storage.NoSync); err != nil {
		b.Fatal(err)
	}
	ks := make([][]byte, round)
	seq := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ks {
			seq = (seq + 7919) % keys
			if newKeys {
				// Between two existing keys, as a random key would be.
				ks[j] = append(key(seq), '!')
			} else {
				ks[j] = key(seq)
			}
		}
		if err := writerRound(db, ks, value); err != nil {
			b.Fatal(err)
		}
	}
}

// writerRound writes a version of each of ks into a batch it drops.
//
//go:noinline
func writerRound(db *storage.DB, ks [][]byte, value []byte) error {
	b := storage.NewBatch(0)
	defer b.Release()
	w := testKeyspace.NewWriter(db, b)
	for _, k := range ks {
		if err := w.Put(k, hlc.Timestamp{WallTime: 10}, value); err != nil {
			return err
		}
	}
	return nil
}
