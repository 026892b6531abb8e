package client

import (
	"bytes"
	"context"
	"iter"

	"github.com/shaledb/shale/api/kvpb"
)

// KeyValue is one entry of a Scan.
type KeyValue struct {
	Key   []byte
	Value []byte // empty with KeysOnly
}

// ScanOptions shape a Scan; the zero value scans everything forward.
type ScanOptions struct {
	// Limit stops the scan after this many entries (0: no limit).
	Limit int
	// Reverse returns entries in descending key order, starting just below
	// end.
	Reverse bool
	// KeysOnly omits values.
	KeysOnly bool
	// PageSize is the number of entries fetched per request
	// (Options.ScanPageSize).
	PageSize uint32
	// Stale lets any replica serve the pages (see StaleRead).
	Stale bool
}

// Scan returns an iterator over the entries in [start, end), where an empty
// start or end is unbounded. It fetches pages of entries as the loop
// consumes them, from one range at a time, continuing each page from the
// last one's resume key (a page ends at its range's boundary, and the next
// one comes from the next range), and retries a page on transient
// failures and stale routing. Entries come in key order, each once. Each
// page is read at one point in time, but later pages may see writes made
// after earlier ones were read.
//
// The sequence yields (entry, nil) per entry; on failure it yields
// (KeyValue{}, err) once and ends. ctx bounds the whole scan; each page
// gets Options.RequestTimeout when ctx has no deadline.
func (c *Client) Scan(ctx context.Context, start, end []byte, opts *ScanOptions) iter.Seq2[KeyValue, error] {
	var o ScanOptions
	if opts != nil {
		o = *opts
	}
	if o.PageSize == 0 {
		o.PageSize = c.opts.ScanPageSize
	}
	return func(yield func(KeyValue, error) bool) {
		returned := 0
		for {
			page := o.PageSize
			if o.Limit > 0 {
				page = uint32(min(int(page), o.Limit-returned))
			}
			req := &kvpb.ScanRequest{
				Header: c.header(false), StartKey: start, EndKey: end,
				Limit: page, Reverse: o.Reverse, KeysOnly: o.KeysOnly,
			}
			if o.Stale {
				StaleRead()(req.Header)
			}
			rk := routeKey{key: start}
			if o.Reverse {
				rk = routeKey{key: end, before: true}
			}
			var resp *kvpb.ScanResponse
			err := c.routed(ctx, "Scan", false, rk, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
				routeHeader(req.Header, d)
				resp, err = e.kv.Scan(ctx, req)
				return err
			})
			if err != nil {
				yield(KeyValue{}, err)
				return
			}
			for _, kv := range resp.Kvs {
				if !yield(KeyValue{Key: kv.Key, Value: kv.Value}, nil) {
					return
				}
				returned++
			}
			if !resp.More || (o.Limit > 0 && returned >= o.Limit) {
				return
			}
			if len(resp.Kvs) == 0 && !movesOn(start, end, resp.ResumeKey, o.Reverse) {
				// A node must make progress; refuse to loop forever.
				yield(KeyValue{}, &Error{Op: "Scan", Msg: "the node returned an empty page with more set", kind: ErrInternal})
				return
			}
			if o.Reverse {
				end = resp.ResumeKey
			} else {
				start = resp.ResumeKey
			}
		}
	}
}

// movesOn reports whether resuming at resume makes progress: past start
// forward, below end in reverse. An empty page is legitimate when a range
// holds none of the keys: it resumes at the range's boundary.
func movesOn(start, end, resume []byte, reverse bool) bool {
	if reverse {
		return len(end) == 0 || bytes.Compare(resume, end) < 0
	}
	return bytes.Compare(resume, start) > 0
}
