package client

import (
	"bytes"
	"context"
	"fmt"
	"iter"

	"github.com/shaledb/shale/api/kvpb"
)

// KeyValue is one entry of a Scan.
type KeyValue struct {
	Key   []byte
	Value []byte // empty with KeysOnly
	// Version is the timestamp the value was written at; CreateVersion
	// the version that created the key (see GetResult).
	Version       Timestamp
	CreateVersion Timestamp
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
}

// Scan returns an iterator over the entries in [start, end), where an empty
// start or end is unbounded. It fetches pages of entries as the loop
// consumes them, from one range at a time, continuing each page from the
// last one's resume key (a page ends at its range's boundary, and the next
// one comes from the next range), and retries a page on transient
// failures and stale routing. Entries come in key order, each once.
//
// Every page of every range is read at one timestamp, so the scan sees
// the key space as it was at one moment, never a mix: the first page is
// read at the newest state of its range, and every later page at the
// timestamp that one was served at (ServedAt reports it). With
// AtTimestamp every page is read at that timestamp ("as of").
//
// The sequence yields (entry, nil) per entry; on failure it yields
// (KeyValue{}, err) once and ends. ctx bounds the whole scan; each page
// gets Options.RequestTimeout when ctx has no deadline.
func (c *Client) Scan(ctx context.Context, start, end []byte, opts *ScanOptions, ropts ...ReadOption) iter.Seq2[KeyValue, error] {
	var o ScanOptions
	if opts != nil {
		o = *opts
	}
	if o.PageSize == 0 {
		o.PageSize = c.opts.ScanPageSize
	}
	ro, bad := readOpts("Scan", ropts)
	return func(yield func(KeyValue, error) bool) {
		if bad != nil {
			yield(KeyValue{}, bad)
			return
		}
		returned := 0
		at, first := ro.at, true
		for {
			page := o.PageSize
			if o.Limit > 0 {
				page = uint32(min(int(page), o.Limit-returned))
			}
			rk := routeKey{key: start, spread: ro.stale}
			if o.Reverse {
				rk = routeKey{key: end, before: true, spread: ro.stale}
			}
			// Each run builds its own request: a hedged read runs it on
			// several nodes at once (hedge.go).
			// (A losing run may start after this page is done: it reads
			// copies, never the loop's variables.)
			pageAt, pStart, pEnd, pLimit := at, start, end, page
			resp, err := routedRead(c, ctx, "Scan", readHedge(ro, pageAt), rk, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (*kvpb.ScanResponse, error) {
				return e.kv.Scan(ctx, &kvpb.ScanRequest{
					Header: routeHeader(c.readHeaderAt(ro, pageAt), d), StartKey: pStart, EndKey: pEnd,
					Limit: pLimit, Reverse: o.Reverse, KeysOnly: o.KeysOnly,
				})
			})
			if err == nil {
				at, err = c.pageTimestamp("Scan", resp.GetHeader(), at)
			}
			if err != nil {
				yield(KeyValue{}, err)
				return
			}
			if first {
				first = false
				ro.served(at)
			}
			for _, kv := range resp.Kvs {
				e := KeyValue{Key: kv.Key, Value: kv.Value}
				if e.Version, err = fromProto(kv.GetVersion()); err == nil {
					e.CreateVersion, err = fromProto(kv.GetCreateVersion())
				}
				if err != nil {
					yield(KeyValue{}, malformedAnswer("Scan", "version", err))
					return
				}
				if !yield(e, nil) {
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

// pageTimestamp checks the timestamp one part of a multi-part read
// (a scan page, a BatchGet group) was served at and returns the timestamp
// the later parts must be read at: at if it was set (and the node must
// then have served exactly it), else the one the node answered with (zero
// from a node older than versions: the later parts are then read at their
// own newest state, as before versions).
func (c *Client) pageTimestamp(op string, h *kvpb.ResponseHeader, at Timestamp) (Timestamp, error) {
	rt, err := c.sawHeader(op, h)
	if err != nil {
		return Timestamp{}, err
	}
	switch {
	case at.IsZero():
		return rt, nil
	case !rt.IsZero() && rt != at:
		return Timestamp{}, &Error{Op: op, kind: ErrInternal,
			Msg: fmt.Sprintf("asked to read at %s, the node served %s", FormatTimestamp(at), FormatTimestamp(rt))}
	}
	return at, nil
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
