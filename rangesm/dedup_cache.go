package rangesm

import (
	"encoding/binary"
	"fmt"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// dedupCache is what a replica knows of its dedup state (dedup.go) without
// reading the engine: per client, its floor and which recent seqs have a
// record. Without it every client write read two keys from the engine
// while applying (its record, to find a retry, and its client's floor), on
// every replica: about 7% of a node's CPU under a write load. With it, a
// write whose seq is above every seq the client has a record for (the
// common case: clients number their requests upwards) reads nothing.
//
// The cache must never claim less than the engine holds, or a retry would
// apply twice. So it is emptied whenever the range's dedup state may change
// by any other way than applyDeduplicated: a snapshot, and any entry
// that is not a plain client write (a DedupGC, a split, a configuration
// change, any kind added later). An emptied cache is refilled client by
// client from the engine, after writing the apply batch so far.
//
// REQUIRES: the owning replica's raftMu.
type dedupCache struct {
	clients map[uint64]*dedupClient
}

// dedupCacheMaxClients bounds the cache; past it the cache is emptied and
// refills with the clients still writing.
const dedupCacheMaxClients = 4096

// dedupWindowBits is how many seqs below a client's highest seq the cache
// tracks exactly.
const dedupWindowBits = 256

// dedupClient is one client's dedup state in one range.
type dedupClient struct {
	// floor is the lowest seq still deduplicated (dedup.go).
	floor uint64
	// max is at least the highest seq with a record (0 if none).
	max uint64
	// exactFrom: for every seq >= exactFrom within the window below max,
	// recent says whether it has a record.
	exactFrom uint64
	// recent has bit seq%dedupWindowBits set for the seqs in
	// (max-dedupWindowBits, max] that have a record.
	recent [dedupWindowBits / 64]uint64
}

// recorded reports whether seq has a record: known is false when the
// cache cannot tell (the engine must be read).
func (c *dedupClient) recorded(seq uint64) (has, known bool) {
	if seq > c.max {
		return false, true
	}
	if seq < c.exactFrom || c.max-seq >= dedupWindowBits {
		return false, false
	}
	return c.recent[(seq%dedupWindowBits)/64]&(1<<(seq%64)) != 0, true
}

// record notes that seq now has a record.
func (c *dedupClient) record(seq uint64) {
	if seq > c.max {
		if seq-c.max >= dedupWindowBits {
			c.recent = [dedupWindowBits / 64]uint64{}
		} else {
			// The seqs entering the window have no record yet.
			for s := c.max + 1; s < seq; s++ {
				c.recent[(s%dedupWindowBits)/64] &^= 1 << (s % 64)
			}
		}
		c.max = seq
	} else if c.max-seq >= dedupWindowBits {
		return // below the window: recorded() never answers for it
	}
	c.recent[(seq%dedupWindowBits)/64] |= 1 << (seq % 64)
}

// clear forgets everything: the dedup state may have changed behind the
// cache's back.
func (d *dedupCache) clear() {
	clear(d.clients)
}

// dedupClient returns client's cached dedup state in r, loading it
// from the engine on a miss. A load first writes the apply batch so far,
// so that the engine holds every record staged before (the cache may have
// been emptied after they were staged).
// REQUIRES: the replica's raftMu.
func (r *Range) dedupClient(client uint64) (*dedupClient, error) {
	d := &r.dedup
	if c := d.clients[client]; c != nil {
		return c, nil
	}
	a := &r.ov
	if err := r.flush(); err != nil {
		return nil, err
	}
	c := &dedupClient{}
	if fv, ok, err := a.get(keys.DedupFloorKey(r.rangeID, client)); err != nil {
		return nil, err
	} else if ok {
		if c.floor, _, err = decodeDedupFloor(fv); err != nil {
			return nil, fmt.Errorf("client %d: %w", client, err)
		}
	}
	last, found, err := lastDedupSeq(a.db, r.rangeID, client)
	if err != nil {
		return nil, fmt.Errorf("client %d: %w", client, err)
	}
	if found {
		// Known: last has a record, nothing above it has.
		c.max, c.exactFrom = last, last
		c.record(last)
	} else {
		// Known: nothing has a record (seq 0 is read, it is never used).
		c.exactFrom = 1
	}
	if d.clients == nil || len(d.clients) >= dedupCacheMaxClients {
		d.clients = make(map[uint64]*dedupClient)
	}
	d.clients[client] = c
	return c, nil
}

// lastDedupSeq returns the highest seq of client's dedup records in range
// rangeID; found is false if it has none.
func lastDedupSeq(db *storage.DB, rangeID, client uint64) (seq uint64, found bool, err error) {
	lower := keys.DedupRecordKey(rangeID, client, 0)
	prefix := lower[:len(lower)-8]
	// Every record key of the client is prefix + 8 bytes of seq, so all
	// sort below prefix + 0xff * 8 + 0x00.
	upper := append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00)
	it, err := db.NewIter(&storage.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, false, it.Error()
	}
	k := it.UnsafeKey()
	if len(k) != len(lower) {
		return 0, false, fmt.Errorf("dedup record key %x of unexpected length", k)
	}
	return binary.BigEndian.Uint64(k[len(k)-8:]), true, nil
}
