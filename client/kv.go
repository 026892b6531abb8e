package client

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// ReadOption changes how a read is served: AtTimestamp, StaleRead,
// ServedAt.
type ReadOption func(*readOptions)

// readOptions are a read's options once applied.
type readOptions struct {
	at           Timestamp // AtTimestamp; zero: none
	atSet        bool
	stale        bool // StaleRead
	maxStaleness time.Duration
	servedAt     *Timestamp
	// committed: the client's own committed transactions whose intents
	// the read may meet unresolved (txn_resolve.go); a Tx's reads only.
	committed []*kvpb.CommittedTxn
}

// withCommitted has the read take the intents of committed as committed
// (txn_resolve.go).
func withCommitted(committed []*kvpb.CommittedTxn) ReadOption {
	return func(o *readOptions) { o.committed = committed }
}

// AtTimestamp reads as of ts: exactly the versions at or below ts, the
// state the keys had at that point ("as of"). ts must lie within the
// cluster's retention window (10 minutes by default): older history is
// gone and the read fails with ErrHistoryCompacted; a ts beyond the
// serving node's clock plus the maximum clock offset fails with
// ErrInvalidArgument. Reading at a timestamp a read was served at
// (ServedAt) returns exactly what that read returned.
func AtTimestamp(ts Timestamp) ReadOption {
	return func(o *readOptions) { o.at, o.atSet = ts, true }
}

// StaleRead makes a bounded-staleness read (a follower read): any replica
// of the range may serve it, without asking the leader, at its closed
// timestamp (a timestamp no write will ever land at or below), provided
// that is no older than maxStaleness. So the answer is a consistent
// snapshot, at most maxStaleness old, that may miss the latest writes; it
// never shows a value that was never written. A replica too far behind
// sends the client to the leader, which serves it. The client spreads
// such reads over the range's replicas. maxStaleness must be positive
// and above the cluster's closed-timestamp lag (docs/versions.md) to be
// served by followers; ServedAt reports the timestamp. Reads are
// linearizable without it.
func StaleRead(maxStaleness time.Duration) ReadOption {
	return func(o *readOptions) { o.stale, o.maxStaleness = true, maxStaleness }
}

// ServedAt stores in *dst the timestamp the read was served at: every
// version at or below it was visible to the read, none above it. A Scan
// or BatchGet reads every range at this one timestamp. It stays zero when
// the node did not say (a node older than versions). For a Scan, *dst is
// set when the first page arrives; read it once the loop is done.
func ServedAt(dst *Timestamp) ReadOption {
	return func(o *readOptions) { o.servedAt = dst }
}

// readOpts applies opts and checks them.
func readOpts(op string, opts []ReadOption) (readOptions, *Error) {
	var o readOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.stale && o.maxStaleness < time.Microsecond {
		return o, &Error{Op: op, Msg: fmt.Sprintf("StaleRead needs a positive staleness bound of at least 1µs, not %v", o.maxStaleness), kind: ErrInvalidArgument}
	}
	if o.atSet {
		if e := checkTimestamp(op, "AtTimestamp", o.at); e != nil {
			return o, e
		}
		if o.stale {
			return o, &Error{Op: op, Msg: "AtTimestamp and StaleRead do not go together: a read is either as of a timestamp or stale", kind: ErrInvalidArgument}
		}
	}
	return o, nil
}

// header is the request header of a read with these options; at, when
// not zero, is the timestamp to read at (the option's, or the one the
// first range of a multi-range read was served at).
func (c *Client) readHeaderAt(o readOptions, at Timestamp) *kvpb.RequestHeader {
	h := c.header(false)
	if o.stale && at.IsZero() {
		// Later parts of a stale read go at the first one's timestamp: a
		// read at a timestamp, which any replica that has reached it
		// serves.
		h.ReadConsistency = kvpb.ReadConsistency_READ_CONSISTENCY_BOUNDED_STALE
		h.MaxStalenessUs = int64(o.maxStaleness / time.Microsecond)
	}
	h.ReadTimestamp = toProto(at)
	return h
}

// served records the timestamp a read was served at for ServedAt.
func (o readOptions) served(ts Timestamp) {
	if o.servedAt != nil {
		*o.servedAt = ts
	}
}

// GetResult is a key's value and versions: the answer of GetVersioned
// and, per key, of BatchGet. A missing key is Found false, with no value
// or versions.
type GetResult struct {
	Value []byte
	Found bool
	// Version is the timestamp the value was written at.
	Version Timestamp
	// CreateVersion is the version that created the key: its first
	// version after it was last deleted (or ever, if never deleted).
	CreateVersion Timestamp
}

// Get reads key. A missing key is not an error: found is false.
// GetVersioned returns the value's versions too.
func (c *Client) Get(ctx context.Context, key []byte, opts ...ReadOption) (value []byte, found bool, err error) {
	r, err := c.getVersioned(ctx, "Get", key, opts)
	return r.Value, r.Found, err
}

// GetVersioned reads key with its versions. A missing key is not an
// error: Found is false.
func (c *Client) GetVersioned(ctx context.Context, key []byte, opts ...ReadOption) (GetResult, error) {
	return c.getVersioned(ctx, "GetVersioned", key, opts)
}

func (c *Client) getVersioned(ctx context.Context, op string, key []byte, opts []ReadOption) (GetResult, error) {
	if e := c.checkKey(op, "key", key); e != nil {
		return GetResult{}, e
	}
	o, e := readOpts(op, opts)
	if e != nil {
		return GetResult{}, e
	}
	// Each run builds its own request: a hedged read runs it on several
	// nodes at once (hedge.go).
	resp, err := routedRead(c, ctx, op, readHedge(o, o.at), routeKey{key: key, spread: o.stale}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (*kvpb.GetResponse, error) {
		return e.kv.Get(ctx, &kvpb.GetRequest{Header: routeHeader(c.readHeaderAt(o, o.at), d), Key: key, Committed: o.committed})
	})
	if err != nil {
		return GetResult{}, err
	}
	rt, err := c.sawHeader(op, resp.GetHeader())
	if err != nil {
		return GetResult{}, err
	}
	o.served(rt)
	return c.getResult(op, resp.GetFound(), resp.GetValue(), resp.GetVersion(), resp.GetCreateVersion())
}

// getResult builds the answer for one key.
func (c *Client) getResult(op string, found bool, value []byte, version, created *kvpb.Timestamp) (GetResult, error) {
	if !found {
		return GetResult{}, nil
	}
	r := GetResult{Value: value, Found: true}
	if r.Value == nil {
		r.Value = []byte{}
	}
	var err error
	if r.Version, err = c.sawVersion(op, "version", version); err != nil {
		return GetResult{}, err
	}
	if r.CreateVersion, err = c.sawVersion(op, "create_version", created); err != nil {
		return GetResult{}, err
	}
	return r, nil
}

// Put sets key to value. It returns once the write is durable. With
// WithLease the key is attached to a lease (lease.go).
func (c *Client) Put(ctx context.Context, key, value []byte, opts ...WriteOption) error {
	_, err := c.put(ctx, "Put", key, value, opts)
	return err
}

// PutVersioned is Put, returning the version the value was written at.
func (c *Client) PutVersioned(ctx context.Context, key, value []byte, opts ...WriteOption) (Timestamp, error) {
	return c.put(ctx, "PutVersioned", key, value, opts)
}

func (c *Client) put(ctx context.Context, op string, key, value []byte, opts []WriteOption) (Timestamp, error) {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	if e := c.checkKey(op, "key", key); e != nil {
		return Timestamp{}, e
	}
	if e := c.checkValue(op, "value", value); e != nil {
		return Timestamp{}, e
	}
	req := &kvpb.PutRequest{Header: c.header(true), Key: key, Value: value, Lease: uint64(o.lease)}
	var resp *kvpb.PutResponse
	err := c.routed(ctx, op, true, routeKey{key: key}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		routeHeader(req.Header, d)
		resp, err = e.kv.Put(ctx, req)
		return err
	})
	if err != nil {
		return Timestamp{}, err
	}
	return c.written(op, resp.GetHeader(), resp.GetVersion())
}

// written reads the version a write was applied at from its answer. An
// answer the client cannot read is ErrInternal with an unknown outcome
// (the write did apply, but the caller asked for its version).
func (c *Client) written(op string, h *kvpb.ResponseHeader, version *kvpb.Timestamp) (Timestamp, error) {
	if _, err := c.sawHeader(op, h); err != nil {
		err.(*Error).Write = true
		return Timestamp{}, err
	}
	v, err := c.sawVersion(op, "version", version)
	if err != nil {
		err.(*Error).Write = true
		return Timestamp{}, err
	}
	return v, nil
}

// Delete removes key. Deleting a missing key succeeds.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	_, err := c.delete(ctx, "Delete", key)
	return err
}

// DeleteVersioned is Delete, returning the version of the deletion (a
// read as of a timestamp at or above it finds no key).
func (c *Client) DeleteVersioned(ctx context.Context, key []byte) (Timestamp, error) {
	return c.delete(ctx, "DeleteVersioned", key)
}

func (c *Client) delete(ctx context.Context, op string, key []byte) (Timestamp, error) {
	if e := c.checkKey(op, "key", key); e != nil {
		return Timestamp{}, e
	}
	req := &kvpb.DeleteRequest{Header: c.header(true), Key: key}
	var resp *kvpb.DeleteResponse
	err := c.routed(ctx, op, true, routeKey{key: key}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		routeHeader(req.Header, d)
		resp, err = e.kv.Delete(ctx, req)
		return err
	})
	if err != nil {
		return Timestamp{}, err
	}
	return c.written(op, resp.GetHeader(), resp.GetVersion())
}

// DeleteRange removes every key in [start, end). An empty end means the
// end of the key space; start and end may not both be empty (to delete
// every key, pass start "\x00"). Each range the span covers is cleared
// atomically, but a span over several ranges is cleared range by range: a
// failure part way leaves the earlier ranges cleared.
func (c *Client) DeleteRange(ctx context.Context, start, end []byte) error {
	_, err := c.deleteRange(ctx, "DeleteRange", start, end)
	return err
}

// DeleteRangeVersioned is DeleteRange, returning the version of the
// deletion: each range is cleared at a version of its own, and this is
// the highest of them (a read as of it or later sees the whole span
// cleared).
func (c *Client) DeleteRangeVersioned(ctx context.Context, start, end []byte) (Timestamp, error) {
	return c.deleteRange(ctx, "DeleteRangeVersioned", start, end)
}

func (c *Client) deleteRange(ctx context.Context, op string, start, end []byte) (Timestamp, error) {
	if len(start) == 0 && len(end) == 0 {
		// Let the node refuse it with its documented error.
		req := &kvpb.DeleteRangeRequest{Header: c.header(true), StartKey: start, EndKey: end}
		return Timestamp{}, c.do(ctx, op, true, func(ctx context.Context, e *endpoint) error {
			_, err := e.kv.DeleteRange(ctx, req)
			return err
		})
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	var highest Timestamp
	for {
		req := &kvpb.DeleteRangeRequest{Header: c.header(true)}
		var next []byte
		var resp *kvpb.DeleteRangeResponse
		err := c.routed(ctx, op, true, routeKey{key: start}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
			// The part of the span inside this range; the rest follows.
			req.StartKey, req.EndKey, next = start, end, nil
			if de := d.GetEndKey(); len(de) > 0 && (len(end) == 0 || bytes.Compare(end, de) > 0) {
				req.EndKey, next = de, de
			}
			routeHeader(req.Header, d)
			resp, err = e.kv.DeleteRange(ctx, req)
			return err
		})
		if err != nil {
			return Timestamp{}, err
		}
		v, err := c.written(op, resp.GetHeader(), resp.GetVersion())
		if err != nil {
			return Timestamp{}, err
		}
		highest = highest.Forward(v)
		if next == nil {
			return highest, nil
		}
		start = next
	}
}

// BatchGet reads keys; results[i] answers keys[i], with its versions.
// Every key is read at one timestamp, whatever range holds it: the keys
// are grouped by range, the first group is read at the newest state of
// its range, and the other groups, in parallel, at the timestamp that one
// was served at (ServedAt reports it). With AtTimestamp every group is
// read at that timestamp, in parallel.
func (c *Client) BatchGet(ctx context.Context, keys [][]byte, opts ...ReadOption) ([]GetResult, error) {
	return c.batchGet(ctx, keys, opts)
}

// Mutation is one write of a Batch; make them with PutOp, DeleteOp and
// DeleteRangeOp.
type Mutation struct{ m *kvpb.Mutation }

// PutOp sets key to value. With WithLease the key is attached to a lease
// (in a Batch; a transaction refuses it): a lease that does not exist
// fails the whole batch with ErrNotFound, and nothing is written.
func PutOp(key, value []byte, opts ...WriteOption) Mutation {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	return Mutation{&kvpb.Mutation{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: key, Value: value, Lease: uint64(o.lease)}}}}
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
	_, err := c.batch(ctx, "Batch", muts)
	return err
}

// BatchVersioned is Batch, returning the version the batch was applied
// at: every key it writes gets this one version.
func (c *Client) BatchVersioned(ctx context.Context, muts ...Mutation) (Timestamp, error) {
	return c.batch(ctx, "BatchVersioned", muts)
}

func (c *Client) batch(ctx context.Context, op string, muts []Mutation) (Timestamp, error) {
	req := &kvpb.BatchRequest{Header: c.header(true), Mutations: make([]*kvpb.Mutation, len(muts))}
	for i, m := range muts {
		req.Mutations[i] = m.m
	}
	if len(muts) == 0 {
		return Timestamp{}, &Error{Op: op, Msg: "a batch needs at least one mutation", kind: ErrInvalidArgument}
	}
	if e := c.checkMutations(op, muts); e != nil {
		return Timestamp{}, e
	}
	var resp *kvpb.BatchResponse
	err := c.routed(ctx, op, true, routeKey{key: kvpb.MutationKey(muts[0].m)}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		if err := checkBatchInRange(d, muts); err != nil {
			return err
		}
		routeHeader(req.Header, d)
		resp, err = e.kv.Batch(ctx, req)
		return err
	})
	if err != nil {
		return Timestamp{}, err
	}
	return c.written(op, resp.GetHeader(), resp.GetVersion())
}

// Condition is what a key must hold for CompareAndSwap to act.
type Condition struct {
	absent    bool
	value     []byte
	byVersion bool // IfVersion: compare version, not value
	version   Timestamp
}

// IfAbsent: the key must not exist.
func IfAbsent() Condition { return Condition{absent: true} }

// IfValue: the key must exist with exactly this value.
func IfValue(v []byte) Condition { return Condition{value: v} }

// IfVersion: the key must exist and its newest version must be exactly v
// (a GetResult's Version, or the version a write returned). Unlike
// IfValue it fails if the key was rewritten since, even with the same
// value, and it sends no value to compare. v must not be zero.
func IfVersion(v Timestamp) Condition { return Condition{byVersion: true, version: v} }

// CASResult is the outcome of CompareAndSwap or CompareAndDelete. A failed
// comparison is not an error: Succeeded is false, and Found, Current and
// the current versions describe the key as it was.
type CASResult struct {
	Succeeded bool
	Found     bool
	Current   []byte
	// CurrentVersion and CurrentCreateVersion are the key's versions
	// before the operation (when Found).
	CurrentVersion       Timestamp
	CurrentCreateVersion Timestamp
	// Version is the version the swap or deletion was applied at (when
	// Succeeded).
	Version Timestamp
}

// CompareAndSwap sets key to newValue if the key satisfies cond,
// atomically. With WithLease the new value is attached to a lease; a
// lease that does not exist fails the call with ErrNotFound and nothing
// is written, whatever the comparison would have said.
func (c *Client) CompareAndSwap(ctx context.Context, key []byte, cond Condition, newValue []byte, opts ...WriteOption) (CASResult, error) {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	return c.cas(ctx, "CompareAndSwap", cond, &kvpb.CompareAndSwapRequest{Key: key, NewValue: newValue, Lease: uint64(o.lease)})
}

// CompareAndDelete deletes key if it satisfies cond, atomically.
func (c *Client) CompareAndDelete(ctx context.Context, key []byte, cond Condition) (CASResult, error) {
	return c.cas(ctx, "CompareAndDelete", cond, &kvpb.CompareAndSwapRequest{Key: key, Delete: true})
}

func (c *Client) cas(ctx context.Context, op string, cond Condition, req *kvpb.CompareAndSwapRequest) (CASResult, error) {
	if cond.byVersion {
		if e := checkTimestamp(op, "IfVersion", cond.version); e != nil {
			return CASResult{}, e
		}
		req.ExpectedVersion = toProto(cond.version)
	} else {
		req.ExpectAbsent, req.ExpectedValue = cond.absent, cond.value
	}
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
	if r.Version, err = c.written(op, resp.GetHeader(), resp.GetVersion()); err != nil {
		return CASResult{}, err
	}
	cur, err := c.getResult(op, resp.GetFound(), nil, resp.GetCurrentVersion(), resp.GetCurrentCreateVersion())
	if err != nil {
		err.(*Error).Write = true
		return CASResult{}, err
	}
	r.CurrentVersion, r.CurrentCreateVersion = cur.Version, cur.CreateVersion
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
