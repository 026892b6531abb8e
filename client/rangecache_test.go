package client

import (
	"errors"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
)

func desc(id, gen uint64, start, end string) *kvpb.RangeDescriptor {
	d := &kvpb.RangeDescriptor{RangeId: id, Generation: gen}
	if start != "" {
		d.StartKey = []byte(start)
	}
	if end != "" {
		d.EndKey = []byte(end)
	}
	return d
}

func lookupID(c *rangeCache, key string) uint64 {
	if e := c.lookup([]byte(key)); e != nil {
		return e.desc.GetRangeId()
	}
	return 0
}

func TestRangeCacheLookupAndSplit(t *testing.T) {
	c := newRangeCache()
	c.insert(desc(2, 1, "", ""), 1)
	if got := lookupID(c, "m"); got != 2 {
		t.Fatalf("lookup m = range %d; want 2", got)
	}
	// A split: the narrowed left and the new right replace the old entry.
	c.insert(desc(2, 2, "", "m"), 0)
	c.insert(desc(3, 2, "m", ""), 2)
	for key, want := range map[string]uint64{"": 2, "a": 2, "l\xff": 2, "m": 3, "z": 3} {
		if got := lookupID(c, key); got != want {
			t.Fatalf("lookup %q = range %d; want %d", key, got, want)
		}
	}
	// The left kept its leader: the new descriptor named none.
	if e := c.lookup([]byte("a")); e.leader != 0 {
		t.Fatalf("leader of the narrowed range = %d; a new generation starts unknown", e.leader)
	}
	// An older descriptor of a cached range does not replace the newer.
	c.insert(desc(2, 1, "", ""), 1)
	if got := lookupID(c, "z"); got != 3 {
		t.Fatalf("a stale descriptor evicted the newer right-hand range (lookup z = %d)", got)
	}
	if c.size() != 2 {
		t.Fatalf("cache holds %d ranges; want 2", c.size())
	}
	c.evict(3)
	if got := lookupID(c, "z"); got != 0 {
		t.Fatalf("lookup after evict = %d", got)
	}
}

func TestRangeCacheLookupBefore(t *testing.T) {
	c := newRangeCache()
	c.insert(desc(2, 2, "", "m"), 0)
	c.insert(desc(3, 2, "m", "t"), 0)
	c.insert(desc(4, 2, "t", ""), 0)
	for end, want := range map[string]uint64{"": 4, "z": 4, "t": 3, "n": 3, "m": 2, "b": 2} {
		e := c.lookupBefore([]byte(end))
		if end == "" {
			e = c.lookupBefore(nil)
		}
		if e == nil || e.desc.GetRangeId() != want {
			t.Fatalf("lookupBefore(%q) = %v; want range %d", end, e, want)
		}
	}
	c.evict(4)
	if e := c.lookupBefore(nil); e != nil {
		t.Fatalf("lookupBefore(+inf) without the last range = %v", e.desc)
	}
}

func TestCheckBatchInRange(t *testing.T) {
	d := desc(3, 1, "b", "m")
	if err := checkBatchInRange(d, []Mutation{PutOp([]byte("b"), nil), DeleteRangeOp([]byte("c"), []byte("m"))}); err != nil {
		t.Fatalf("a batch inside the range: %v", err)
	}
	for _, muts := range [][]Mutation{
		{PutOp([]byte("b"), nil), PutOp([]byte("m"), nil)},
		{DeleteOp([]byte("a"))},
		{DeleteRangeOp([]byte("c"), nil)},
	} {
		err := checkBatchInRange(d, muts)
		if err == nil {
			t.Fatalf("batch %v accepted for range [b, m)", muts)
		}
		if !errors.Is(err, ErrBatchSpansRanges) || !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("batch %v: err = %v; want ErrBatchSpansRanges and ErrInvalidArgument", muts, err)
		}
	}
}
