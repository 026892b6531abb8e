package client

import (
	"bytes"
	"context"

	"github.com/shaledb/shale/api/kvpb"
)

// ReadOption changes how a read is served.
type ReadOption func(*kvpb.RequestHeader)

// StaleRead lets any replica answer from its applied state: cheaper and
// available without a leader, but it may miss recent writes (it never
// returns a value that was never written). Reads are linearizable without
// it.
func StaleRead() ReadOption {
	return func(h *kvpb.RequestHeader) { h.ReadConsistency = kvpb.ReadConsistency_READ_CONSISTENCY_STALE }
}

func (c *Client) readHeader(opts []ReadOption) *kvpb.RequestHeader {
	h := c.header(false)
	for _, o := range opts {
		o(h)
	}
	return h
}

// Get reads key. A missing key is not an error: found is false.
func (c *Client) Get(ctx context.Context, key []byte, opts ...ReadOption) (value []byte, found bool, err error) {
	if e := c.checkKey("Get", "key", key); e != nil {
		return nil, false, e
	}
	req := &kvpb.GetRequest{Header: c.readHeader(opts), Key: key}
	var resp *kvpb.GetResponse
	err = c.routed(ctx, "Get", false, routeKey{key: key}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		routeHeader(req.Header, d)
		resp, err = e.kv.Get(ctx, req)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if !resp.Found {
		return nil, false, nil
	}
	if resp.Value == nil {
		return []byte{}, true, nil
	}
	return resp.Value, true, nil
}

// Put sets key to value. It returns once the write is durable.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if e := c.checkKey("Put", "key", key); e != nil {
		return e
	}
	if e := c.checkValue("Put", "value", value); e != nil {
		return e
	}
	req := &kvpb.PutRequest{Header: c.header(true), Key: key, Value: value}
	return c.routed(ctx, "Put", true, routeKey{key: key}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
		routeHeader(req.Header, d)
		_, err := e.kv.Put(ctx, req)
		return err
	})
}

// Delete removes key. Deleting a missing key succeeds.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if e := c.checkKey("Delete", "key", key); e != nil {
		return e
	}
	req := &kvpb.DeleteRequest{Header: c.header(true), Key: key}
	return c.routed(ctx, "Delete", true, routeKey{key: key}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
		routeHeader(req.Header, d)
		_, err := e.kv.Delete(ctx, req)
		return err
	})
}

// DeleteRange removes every key in [start, end). An empty end means the
// end of the key space; start and end may not both be empty (to delete
// every key, pass start "\x00"). Each range the span covers is cleared
// atomically, but a span over several ranges is cleared range by range: a
// failure part way leaves the earlier ranges cleared.
func (c *Client) DeleteRange(ctx context.Context, start, end []byte) error {
	if len(start) == 0 && len(end) == 0 {
		// Let the node refuse it with its documented error.
		req := &kvpb.DeleteRangeRequest{Header: c.header(true), StartKey: start, EndKey: end}
		return c.do(ctx, "DeleteRange", true, func(ctx context.Context, e *endpoint) error {
			_, err := e.kv.DeleteRange(ctx, req)
			return err
		})
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	for {
		req := &kvpb.DeleteRangeRequest{Header: c.header(true)}
		var next []byte
		err := c.routed(ctx, "DeleteRange", true, routeKey{key: start}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
			// The part of the span inside this range; the rest follows.
			req.StartKey, req.EndKey, next = start, end, nil
			if de := d.GetEndKey(); len(de) > 0 && (len(end) == 0 || bytes.Compare(end, de) > 0) {
				req.EndKey, next = de, de
			}
			routeHeader(req.Header, d)
			_, err := e.kv.DeleteRange(ctx, req)
			return err
		})
		if err != nil || next == nil {
			return err
		}
		start = next
	}
}

// GetResult is the answer for one key of a BatchGet.
type GetResult struct {
	Value []byte
	Found bool
}

// BatchGet reads keys; results[i] answers keys[i]. The keys are grouped
// by range and each group is read, in parallel, at one consistent point of
// its range (keys in different ranges may be read at different points).
func (c *Client) BatchGet(ctx context.Context, keys [][]byte, opts ...ReadOption) ([]GetResult, error) {
	return c.batchGet(ctx, keys, opts)
}

// Mutation is one write of a Batch; make them with PutOp, DeleteOp and
// DeleteRangeOp.
type Mutation struct{ m *kvpb.Mutation }

// PutOp sets key to value.
func PutOp(key, value []byte) Mutation {
	return Mutation{&kvpb.Mutation{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: key, Value: value}}}}
}

// DeleteOp removes key.
func DeleteOp(key []byte) Mutation {
	return Mutation{&kvpb.Mutation{Op: &kvpb.Mutation_Delete{Delete: &kvpb.DeleteOp{Key: key}}}}
}

// DeleteRangeOp removes every key in [start, end) (see DeleteRange).
func DeleteRangeOp(start, end []byte) Mutation {
	return Mutation{&kvpb.Mutation{Op: &kvpb.Mutation_DeleteRange{DeleteRange: &kvpb.DeleteRangeOp{StartKey: start, EndKey: end}}}}
}

// Batch applies the mutations atomically and in order (a later mutation of
// a key wins): all of them or none.
func (c *Client) Batch(ctx context.Context, muts ...Mutation) error {
	req := &kvpb.BatchRequest{Header: c.header(true), Mutations: make([]*kvpb.Mutation, len(muts))}
	for i, m := range muts {
		req.Mutations[i] = m.m
	}
	if len(muts) == 0 {
		return &Error{Op: "Batch", Msg: "a batch needs at least one mutation", kind: ErrInvalidArgument}
	}
	if e := c.checkMutations("Batch", muts); e != nil {
		return e
	}
	return c.routed(ctx, "Batch", true, routeKey{key: kvpb.MutationKey(muts[0].m)}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
		if err := checkBatchInRange(d, muts); err != nil {
			return err
		}
		routeHeader(req.Header, d)
		_, err := e.kv.Batch(ctx, req)
		return err
	})
}

// Condition is what a key must hold for CompareAndSwap to act.
type Condition struct {
	absent bool
	value  []byte
}

// IfAbsent: the key must not exist.
func IfAbsent() Condition { return Condition{absent: true} }

// IfValue: the key must exist with exactly this value.
func IfValue(v []byte) Condition { return Condition{value: v} }

// CASResult is the outcome of CompareAndSwap or CompareAndDelete. A failed
// comparison is not an error: Succeeded is false, and Found and Current
// describe the key as it was.
type CASResult struct {
	Succeeded bool
	Found     bool
	Current   []byte
}

// CompareAndSwap sets key to newValue if the key satisfies cond, atomically.
func (c *Client) CompareAndSwap(ctx context.Context, key []byte, cond Condition, newValue []byte) (CASResult, error) {
	return c.cas(ctx, "CompareAndSwap", &kvpb.CompareAndSwapRequest{
		Key: key, ExpectAbsent: cond.absent, ExpectedValue: cond.value, NewValue: newValue,
	})
}

// CompareAndDelete deletes key if it satisfies cond, atomically.
func (c *Client) CompareAndDelete(ctx context.Context, key []byte, cond Condition) (CASResult, error) {
	return c.cas(ctx, "CompareAndDelete", &kvpb.CompareAndSwapRequest{
		Key: key, ExpectAbsent: cond.absent, ExpectedValue: cond.value, Delete: true,
	})
}

func (c *Client) cas(ctx context.Context, op string, req *kvpb.CompareAndSwapRequest) (CASResult, error) {
	if e := c.checkKey(op, "key", req.Key); e != nil {
		return CASResult{}, e
	}
	if e := c.checkValue(op, "expected_value", req.ExpectedValue); e != nil {
		return CASResult{}, e
	}
	if e := c.checkValue(op, "new_value", req.NewValue); e != nil {
		return CASResult{}, e
	}
	req.Header = c.header(true)
	var resp *kvpb.CompareAndSwapResponse
	err := c.routed(ctx, op, true, routeKey{key: req.Key}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		routeHeader(req.Header, d)
		resp, err = e.kv.CompareAndSwap(ctx, req)
		return err
	})
	if err != nil {
		return CASResult{}, err
	}
	r := CASResult{Succeeded: resp.Succeeded, Found: resp.Found, Current: resp.CurrentValue}
	if r.Found && r.Current == nil {
		r.Current = []byte{}
	}
	return r, nil
}

// Status reports on the node the client is talking to.
func (c *Client) Status(ctx context.Context) (*kvpb.StatusResponse, error) {
	var resp *kvpb.StatusResponse
	err := c.do(ctx, "Status", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.Status(ctx, &kvpb.StatusRequest{})
		return err
	})
	return resp, err
}
