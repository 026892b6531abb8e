package mvcc

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/storage"
)

// Stats counts what a span of a keyspace holds: the live data that range
// sizes and split and merge decisions go by, and the history that GC works
// on. A range keeps its Stats current by adding each write's delta
// (Writer.Delta, GCResult.Delta) and can recompute them (ComputeStats),
// e.g. for the two halves of a split.
type Stats struct {
	Keys     int64 // user keys with at least one version
	Versions int64 // versions, deletions included
	Bytes    int64 // engine key + value bytes of every version
	LiveKeys int64 // user keys whose newest version is a live value
	// LiveBytes is the engine key + value bytes of those newest versions.
	LiveBytes int64
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Keys += o.Keys
	s.Versions += o.Versions
	s.Bytes += o.Bytes
	s.LiveKeys += o.LiveKeys
	s.LiveBytes += o.LiveBytes
}

// versionBytes is the engine footprint of one version: its engine key
// (prefix, key_enc of a key whose key_enc is encLen bytes, suffix) and its
// stored value.
func (ks Keyspace) versionBytes(encLen int, live bool, lease uint64, valueLen int) int64 {
	n := len(ks.Prefix) + encLen + SuffixLen
	if live {
		return int64(n + liveValueLen(lease, valueLen))
	}
	return int64(n + 1)
}

// ComputeStats counts the versions of user keys in [start, end) (nil: the
// keyspace's beginning or end) by reading them all.
func (ks Keyspace) ComputeStats(r Reader, start, end []byte) (s Stats, err error) {
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return Stats{}, fmt.Errorf("mvcc: stats: start %q is above end %q", start, end)
	}
	lower, upper := ks.bounds(start, end)
	it, err := r.NewIter(&storage.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return Stats{}, fmt.Errorf("mvcc: stats: %w", err)
	}
	defer closeIter(it, &err)
	var cur []byte
	for ok := it.SeekGE(lower); ok; ok = it.Next() {
		e, err := ks.decodeEntry(it)
		if err != nil {
			return Stats{}, err
		}
		size := int64(len(it.UnsafeKey()) + len(it.UnsafeValue()))
		s.Versions++
		s.Bytes += size
		if cur == nil || !bytes.Equal(e.keyEnc, cur) {
			cur = append(cur[:0], e.keyEnc...)
			s.Keys++
			if e.live {
				s.LiveKeys++
				s.LiveBytes += size
			}
		}
	}
	if err := it.Error(); err != nil {
		return Stats{}, fmt.Errorf("mvcc: stats: %w", err)
	}
	return s, nil
}
