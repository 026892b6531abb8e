package client

import (
	"context"
	"slices"
	"sync"

	"github.com/shaledb/shale/api/kvpb"
)

// WriteMany applies puts and deletes that may fall in many ranges, for
// bulk loads: the mutations are grouped by range and each group is written
// as one atomic Batch, the groups in parallel. It is NOT atomic across
// ranges: when it fails, some groups may have been applied and others not
// (the error is the first group failure; an ambiguous group makes the
// error ErrAmbiguous). Every mutation is a put or delete of one key, so
// writing the same mutations again is safe. Within a group, a later
// mutation of a key wins, as in Batch; mutations of the same key always
// land in the same group.
//
// DeleteRangeOp is refused (ErrInvalidArgument): use DeleteRange, which
// handles spans that cross ranges.
func (c *Client) WriteMany(ctx context.Context, muts ...Mutation) error {
	const op = "WriteMany"
	if len(muts) == 0 {
		return nil
	}
	for _, m := range muts {
		if _, ok := m.m.GetOp().(*kvpb.Mutation_DeleteRange); ok {
			return &Error{Op: op, kind: ErrInvalidArgument,
				Msg: "WriteMany takes puts and deletes only; use DeleteRange for a span"}
		}
	}
	if e := c.checkMutations(op, muts); e != nil {
		return e
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	// Group by the cached ranges, looking up the misses (each lookup
	// prefetches the following ranges); groups keep the mutations' order.
	groups := map[uint64][]int{}
	var order []uint64
	for i, m := range muts {
		k := kvpb.MutationKey(m.m)
		ent := c.cache.lookup(k)
		if ent == nil {
			var err error
			if ent, err = c.locate(ctx, op, routeKey{key: k}); err != nil {
				return err
			}
		}
		var id uint64 // 0: not known yet; the group's routing finds it
		if ent != nil {
			id = ent.desc.GetRangeId()
		}
		if _, ok := groups[id]; !ok {
			order = append(order, id)
		}
		groups[id] = append(groups[id], i)
	}
	w := &manyWriter{c: c, muts: muts}
	for _, id := range order {
		w.group(ctx, groups[id])
	}
	w.wg.Wait()
	return w.err
}

// manyWriter is one WriteMany call: its groups run on goroutines and the
// first failure is kept.
type manyWriter struct {
	c    *Client
	muts []Mutation
	wg   sync.WaitGroup
	mu   sync.Mutex // guards err
	err  error
}

func (w *manyWriter) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// group writes the mutations at idx on a goroutine: those in the range of
// the first one as one Batch; the others (the range turned out smaller
// than cached) as a further group once it is done.
func (w *manyWriter) group(ctx context.Context, idx []int) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		var mine, rest []int
		req := &kvpb.BatchRequest{}
		first := kvpb.MutationKey(w.muts[idx[0]].m)
		err := w.c.routed(ctx, "WriteMany", true, routeKey{key: first}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
			// Regroup on every attempt: the range may have split. Earlier
			// attempts were definitely not applied (routed retries a write
			// only then), so a regrouped batch takes a new request
			// sequence number; an unchanged one keeps its own, so that a
			// node's dedup state answers a repeat.
			prev := mine
			mine, rest = nil, rest[:0]
			for _, i := range idx {
				if containsKey(d, kvpb.MutationKey(w.muts[i].m)) {
					mine = append(mine, i)
				} else {
					rest = append(rest, i)
				}
			}
			// mine is never empty: d is the range routed found for first.
			if req.Header == nil || !slices.Equal(prev, mine) {
				req.Header = w.c.header(true)
				req.Mutations = req.Mutations[:0]
				for _, i := range mine {
					req.Mutations = append(req.Mutations, w.muts[i].m)
				}
			}
			routeHeader(req.Header, d)
			_, err := e.kv.Batch(ctx, req)
			return err
		})
		if err != nil {
			w.fail(err)
			return
		}
		if len(rest) > 0 {
			w.group(ctx, append([]int(nil), rest...))
		}
	}()
}
