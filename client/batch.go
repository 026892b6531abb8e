package client

import (
	"context"
	"sync"

	"github.com/shaledb/shale/api/kvpb"
)

// checkBatchInRange refuses a batch whose keys are not all in d: a batch
// is atomic only within one range.
func checkBatchInRange(d *kvpb.RangeDescriptor, muts []Mutation) error {
	for _, m := range muts {
		ok := true
		switch op := m.m.GetOp().(type) {
		case *kvpb.Mutation_Put:
			ok = containsKey(d, op.Put.GetKey())
		case *kvpb.Mutation_Delete:
			ok = containsKey(d, op.Delete.GetKey())
		case *kvpb.Mutation_DeleteRange:
			ok = containsSpan(d, op.DeleteRange.GetStartKey(), op.DeleteRange.GetEndKey())
		}
		if !ok {
			return &Error{Op: "Batch", kind: ErrInvalidArgument, cause: ErrBatchSpansRanges,
				Msg: "the batch spans more than one range (key " + quote(kvpb.MutationKey(m.m)) + " is outside " +
					describeRange(d) + "); a batch is atomic only within one range: split it by range"}
		}
	}
	return nil
}

func quote(k []byte) string {
	if len(k) > 64 {
		k = k[:64]
	}
	return string(appendQuoted(nil, k))
}

func appendQuoted(dst, k []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, b := range k {
		if b >= 0x20 && b < 0x7f && b != '"' && b != '\\' {
			dst = append(dst, b)
		} else {
			dst = append(dst, '\\', 'x', hex[b>>4], hex[b&15])
		}
	}
	return append(dst, '"')
}

// batchGet reads keys grouped by range, all at one timestamp: the first
// group first (unless the caller gave the timestamp), then the others in
// parallel at the timestamp it was served at. A group whose range moved
// is regrouped (its keys may now span ranges) and read again, within the
// caller's deadline.
func (c *Client) batchGet(ctx context.Context, keys [][]byte, opts []ReadOption) ([]GetResult, error) {
	o, e := readOpts("BatchGet", opts)
	if e != nil {
		return nil, e
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	out := make([]GetResult, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	// Group by the cached ranges (looking up the misses first: each
	// lookup prefetches the following ranges), then read the groups in
	// parallel.
	groups := map[uint64][]int{}
	var order []uint64
	for i, k := range keys {
		ent := c.cache.lookup(k)
		if ent == nil {
			var err error
			if ent, err = c.locate(ctx, "BatchGet", routeKey{key: k}); err != nil {
				return nil, err
			}
		}
		var id uint64 // 0: not found yet; routed looks it up again
		if ent != nil {
			id = ent.desc.GetRangeId()
		}
		if _, ok := groups[id]; !ok {
			order = append(order, id)
		}
		groups[id] = append(groups[id], i)
	}
	b := &batchGetter{c: c, keys: keys, o: o, at: o.at, out: out}
	if b.at.IsZero() {
		// The first group fixes the timestamp the others are read at.
		b.group(ctx, groups[order[0]], true)
		b.wg.Wait()
		if b.firstErr != nil {
			return nil, b.firstErr
		}
		order = order[1:]
	}
	for _, id := range order {
		b.group(ctx, groups[id], false)
	}
	b.wg.Wait()
	if b.firstErr != nil {
		return nil, b.firstErr
	}
	o.served(b.at)
	return out, nil
}

// batchGetter is one BatchGet in progress.
type batchGetter struct {
	c    *Client
	keys [][]byte
	o    readOptions
	// at is the timestamp the groups are read at; zero until the first
	// group has answered when the caller gave none. Written only before
	// the groups that read it start.
	at  Timestamp
	out []GetResult

	wg       sync.WaitGroup
	mu       sync.Mutex
	firstErr error
}

func (b *batchGetter) fail(err error) {
	b.mu.Lock()
	if b.firstErr == nil {
		b.firstErr = err
	}
	b.mu.Unlock()
}

// group reads the keys at idx on a goroutine: those in the range of the
// first key as one request; the others (when the range turned out smaller
// than cached) in a further group once it is done. first says this group
// fixes b.at: it reads without a timestamp, and its own leftover keys
// are read after it, at the timestamp it answered.
func (b *batchGetter) group(ctx context.Context, idx []int, first bool) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		// Each run regroups (the range may have changed) and builds its
		// own request: a hedged read runs it on several nodes at once
		// (hedge.go).
		type part struct {
			mine, rest []int
			resp       *kvpb.BatchGetResponse
		}
		at0 := b.at
		p, err := routedRead(b.c, ctx, "BatchGet", readHedge(b.o, at0), routeKey{key: b.keys[idx[0]], spread: b.o.stale}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (part, error) {
			var p part
			req := &kvpb.BatchGetRequest{Header: routeHeader(b.c.readHeaderAt(b.o, at0), d), Committed: b.o.committed}
			for _, i := range idx {
				if containsKey(d, b.keys[i]) {
					p.mine = append(p.mine, i)
					req.Keys = append(req.Keys, b.keys[i])
				} else {
					p.rest = append(p.rest, i)
				}
			}
			// Every key of the read in this one request: no other group
			// is read at its answer, so the node need not issue and close
			// a fresh timestamp (served as a Get is).
			req.Whole = first && len(p.mine) == len(b.keys)
			var err error
			p.resp, err = e.kv.BatchGet(ctx, req)
			return p, err
		})
		if err != nil {
			b.fail(err)
			return
		}
		mine, rest, resp := p.mine, p.rest, p.resp
		at, err := b.c.pageTimestamp("BatchGet", resp.GetHeader(), b.at)
		if err != nil {
			b.fail(err)
			return
		}
		if first {
			b.at = at // read by the groups started after this one ends
		}
		if len(resp.GetResults()) != len(mine) {
			b.fail(&Error{Op: "BatchGet", Msg: "the node answered a different number of keys than asked", kind: ErrInternal})
			return
		}
		for j, r := range resp.GetResults() {
			res, err := b.c.getResult("BatchGet", r.GetFound(), r.GetValue(), r.GetVersion(), r.GetCreateVersion())
			if err != nil {
				b.fail(err)
				return
			}
			b.out[mine[j]] = res
		}
		if len(rest) > 0 {
			b.group(ctx, append([]int(nil), rest...), first)
		}
	}()
}
