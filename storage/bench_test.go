package storage

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The benchmarks mirror db_bench's readrandom, readseq, multireadrandom and
// fillbatch on the same shape of data (16-byte keys, 100-byte values), so
// their per-operation figures compare with the same workloads driven from C
// (storage/testdata/capi_bench.c) and with the engine's own db_bench:
// scripts/bench-storage runs the comparison.

const (
	benchNum       = 200_000 // keys in the database
	benchValueSize = 100
)

// benchKey formats i as LevelDB's db_bench does ("%016d": 16 decimal
// digits), by hand: fmt would cost more than some of the operations
// measured, and db_bench's own key formatting is a few nanoseconds.
// REQUIRES: 0 <= i < 1e16
func benchKey(dst []byte, i int) []byte {
	dst = append(dst[:0], "0000000000000000"...)
	for j := 15; j >= 0 && i > 0; j-- {
		dst[j] = byte('0' + i%10)
		i /= 10
	}
	return dst
}

func openBenchDB(b *testing.B) *DB {
	b.Helper()
	db := openTestDB(b, nil)
	var batch Batch
	value := make([]byte, benchValueSize)
	var k []byte
	for i := 0; i < benchNum; i++ {
		binary.LittleEndian.PutUint64(value, uint64(i))
		k = benchKey(k, i)
		batch.Put(k, value)
		if batch.Count() == 1000 {
			if err := db.Write(&batch, NoSync); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
	if err := db.Write(&batch, NoSync); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkGet is readrandom: one Get per operation, keys uniformly random.
func BenchmarkGet(b *testing.B) {
	db := openBenchDB(b)
	rng := rand.New(rand.NewPCG(1, 2))
	var k []byte
	b.SetBytes(16 + benchValueSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k = benchKey(k, rng.IntN(benchNum))
		if _, err := db.Get(k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendGet is readrandom into a reused buffer: no allocation.
func BenchmarkAppendGet(b *testing.B) {
	db := openBenchDB(b)
	rng := rand.New(rand.NewPCG(1, 2))
	var k, v []byte
	b.SetBytes(16 + benchValueSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k = benchKey(k, rng.IntN(benchNum))
		var err error
		if v, err = db.AppendGet(v[:0], k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMultiGet is multireadrandom with batches of 64 keys; one
// operation is one key.
func BenchmarkMultiGet(b *testing.B) {
	db := openBenchDB(b)
	rng := rand.New(rand.NewPCG(1, 2))
	const batch = 64
	keys := make([][]byte, batch)
	b.SetBytes(16 + benchValueSize)
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		for j := range keys {
			keys[j] = benchKey(keys[j], rng.IntN(benchNum))
		}
		vals, err := db.MultiGet(keys)
		if err != nil {
			b.Fatal(err)
		}
		if vals[0] == nil {
			b.Fatal("missing key")
		}
	}
}

// BenchmarkIterNext is readseq: a full forward scan; one operation is one
// entry.
func BenchmarkIterNext(b *testing.B) {
	db := openBenchDB(b)
	it, err := db.NewIter(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	b.SetBytes(16 + benchValueSize)
	b.ResetTimer()
	n := 0
	valid := it.First()
	for i := 0; i < b.N; i++ {
		if !valid {
			valid = it.First()
		}
		n += len(it.UnsafeKey()) + len(it.UnsafeValue())
		valid = it.Next()
	}
	if it.Error() != nil || n == 0 {
		b.Fatal(it.Error())
	}
}

// BenchmarkIterPrev is readreverse.
func BenchmarkIterPrev(b *testing.B) {
	db := openBenchDB(b)
	it, err := db.NewIter(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	b.SetBytes(16 + benchValueSize)
	b.ResetTimer()
	valid := it.Last()
	for i := 0; i < b.N; i++ {
		if !valid {
			valid = it.Last()
		}
		valid = it.Prev()
	}
}

// BenchmarkWriteBatch is fillbatch without sync: batches of 100 puts of
// random keys; one operation is one put.
func BenchmarkWriteBatch(b *testing.B) {
	db := openTestDB(b, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, benchValueSize)
	var batch Batch
	var k []byte
	b.SetBytes(16 + benchValueSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k = benchKey(k, rng.IntN(benchNum*10))
		batch.Put(k, value)
		if batch.Count() == 100 {
			if err := db.Write(&batch, NoSync); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
	if err := db.Write(&batch, NoSync); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBatchEncode measures building a batch in Go (no engine call).
func BenchmarkBatchEncode(b *testing.B) {
	value := make([]byte, benchValueSize)
	var batch Batch
	var k []byte
	b.SetBytes(16 + benchValueSize)
	for i := 0; i < b.N; i++ {
		k = benchKey(k, i)
		batch.Put(k, value)
		if batch.Count() == 1000 {
			batch.Reset()
		}
	}
}
