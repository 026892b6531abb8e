package bench

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
)

// appendKey appends the key of index i: its decimal digits left-padded
// with '0' to size bytes, so that byte order is numeric order (readseq
// relies on it) and keys print readably for both systems.
// REQUIRES: size holds the digits of i (Config.validate checks Keys).
func appendKey(dst []byte, i int64, size int) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], i, 10)
	for range size - len(d) {
		dst = append(dst, '0')
	}
	return append(dst, d...)
}

// fillValue fills v with bytes that differ per writer and per write, so
// that neither system can skip work for repeated values.
func fillValue(v []byte, r *rand.Rand) {
	for i := 0; i < len(v); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(v[i:], w[:])
	}
}

// zipfKeys picks key indexes with YCSB's skew: a Zipf distribution over
// ranks (s = 1.01, the closest to YCSB's constant 0.99 that Go's Zipf
// accepts, since it requires s > 1), with each rank scrambled by a hash so
// that the hot keys are spread over the key space as in YCSB's
// ScrambledZipfianGenerator.
type zipfKeys struct {
	z    *rand.Zipf
	keys uint64
}

func newZipfKeys(r *rand.Rand, keys int64) *zipfKeys {
	return &zipfKeys{z: rand.NewZipf(r, 1.01, 1, uint64(keys-1)), keys: uint64(keys)}
}

func (z *zipfKeys) next() int64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], z.z.Uint64())
	h.Write(b[:])
	return int64(h.Sum64() % z.keys)
}

// The directory tree of dirwalk (seeds/002_*.txt): a directory is stored
// under its parent's inode number and its name, and its value starts with
// its own inode number, so walking /a/b/c takes one dependent lookup per
// level. The tree is a complete fanout-ary tree numbered breadth first:
// the root is inode 0 and child c (0-based) of inode p is inode
// p*fanout+1+c, which lets a walk check every answer.
//
//	key   := 'd' parent:uint64be name
//	name  := "/dir" child:decimal(8)
//	value := inode:uint64be filler (to the value size, at least 8 bytes)

// dirKey appends the key of child c of directory parent.
func dirKey(dst []byte, parent uint64, c int) []byte {
	dst = append(dst, 'd')
	dst = binary.BigEndian.AppendUint64(dst, parent)
	return fmt.Appendf(dst, "/dir%08d", c)
}

// dirCount is the number of directories below the root of a tree.
func dirCount(fanout, depth int) int64 {
	n, level := int64(0), int64(1)
	for range depth {
		level *= int64(fanout)
		n += level
	}
	return n
}

// dirValue returns the value of directory inode, valueSize bytes (at
// least 8).
func dirValue(inode uint64, valueSize int, r *rand.Rand) []byte {
	v := make([]byte, max(8, valueSize))
	fillValue(v[8:], r)
	binary.BigEndian.PutUint64(v, inode)
	return v
}

// dirInode reads the inode number from a directory's value.
func dirInode(v []byte) (uint64, error) {
	if len(v) < 8 {
		return 0, fmt.Errorf("directory value of %d bytes: want at least 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
