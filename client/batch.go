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

// batchGet reads keys grouped by range, the groups in parallel. A group
// whose range moved is regrouped (its keys may now span ranges) and read
// again, within the caller's deadline.
func (c *Client) batchGet(ctx context.Context, keys [][]byte, opts []ReadOption) ([]GetResult, error) {
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
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, id := range order {
		c.batchGetGroup(ctx, keys, groups[id], opts, out, &wg, &mu, &firstErr)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// batchGetGroup reads the keys at idx on a goroutine: those in the range
// of the first key as one request; the others (when the range turned out
// smaller than cached) in a further group once it is done.
func (c *Client) batchGetGroup(ctx context.Context, keys [][]byte, idx []int, opts []ReadOption,
	out []GetResult, wg *sync.WaitGroup, mu *sync.Mutex, firstErr *error) {
	fail := func(err error) {
		mu.Lock()
		if *firstErr == nil {
			*firstErr = err
		}
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var mine, rest []int
		req := &kvpb.BatchGetRequest{Header: c.readHeader(opts)}
		var resp *kvpb.BatchGetResponse
		err := c.routed(ctx, "BatchGet", false, routeKey{key: keys[idx[0]]}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
			// Regroup on every attempt: the range may have changed.
			mine, rest = mine[:0], rest[:0]
			for _, i := range idx {
				if containsKey(d, keys[i]) {
					mine = append(mine, i)
				} else {
					rest = append(rest, i)
				}
			}
			req.Keys = req.Keys[:0]
			for _, i := range mine {
				req.Keys = append(req.Keys, keys[i])
			}
			routeHeader(req.Header, d)
			resp, err = e.kv.BatchGet(ctx, req)
			return err
		})
		if err != nil {
			fail(err)
			return
		}
		if len(resp.GetResults()) != len(mine) {
			fail(&Error{Op: "BatchGet", Msg: "the node answered a different number of keys than asked", kind: ErrInternal})
			return
		}
		for j, r := range resp.GetResults() {
			res := GetResult{Value: r.GetValue(), Found: r.GetFound()}
			if res.Found && res.Value == nil {
				res.Value = []byte{}
			}
			out[mine[j]] = res
		}
		if len(rest) > 0 {
			c.batchGetGroup(ctx, keys, append([]int(nil), rest...), opts, out, wg, mu, firstErr)
		}
	}()
}
