package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Leases (docs/leases.md). A lease lives while its holder sends
// keep-alives; keys put with WithLease are deleted when it expires or is
// revoked, whichever ranges they are in. The cluster guarantees that a
// lease never expires before its TTL has passed since the client sent the
// last keep-alive that was acknowledged (or the Grant), across leader
// changes and node restarts; it may live up to one TTL longer after the
// meta range's leader changes.

// LeaseID names a lease. 0 is no lease.
type LeaseID uint64

// LeaseInfo describes a lease.
type LeaseInfo struct {
	ID LeaseID
	// TTL is the time to live the lease was granted with.
	TTL time.Duration
	// Remaining is the time left before it may expire, as the meta
	// leader's clock sees it; negative once it has ended and its keys are
	// being deleted.
	Remaining time.Duration
	// Keys are the keys put with the lease (TimeToLive with keys only).
	Keys [][]byte
}

// Lease TTL bounds, as the nodes check them.
const (
	MinLeaseTTL = 500 * time.Millisecond
	MaxLeaseTTL = 24 * time.Hour
)

// WriteOption changes how a Put, a Batch's PutOp or a CompareAndSwap writes.
type WriteOption func(*writeOptions)

type writeOptions struct {
	lease LeaseID
}

// WithLease attaches the key to lease id: it is deleted when the lease
// ends. A lease that does not exist (never granted, expired, revoked)
// fails the write with ErrNotFound, and nothing is written (for a Batch:
// none of its mutations).
func WithLease(id LeaseID) WriteOption {
	return func(o *writeOptions) { o.lease = id }
}

func (c *Client) lease(e *endpoint) kvpb.LeaseClient { return kvpb.NewLeaseClient(e.cc) }

// Grant creates a lease with the given time to live, which must be
// within [MinLeaseTTL, MaxLeaseTTL].
func (c *Client) Grant(ctx context.Context, ttl time.Duration) (LeaseID, error) {
	return c.GrantID(ctx, 0, ttl)
}

// GrantID is Grant of a lease with the ID the caller picks (0: the
// cluster picks one). An ID in use fails.
func (c *Client) GrantID(ctx context.Context, id LeaseID, ttl time.Duration) (LeaseID, error) {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, &Error{Op: "Grant", Msg: fmt.Sprintf("a lease TTL must be between %v and %v, got %v", MinLeaseTTL, MaxLeaseTTL, ttl), kind: ErrInvalidArgument}
	}
	var resp *kvpb.LeaseGrantResponse
	err := c.do(ctx, "Grant", true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = c.lease(e).Grant(ctx, &kvpb.LeaseGrantRequest{TtlMs: ttl.Milliseconds(), Id: uint64(id)})
		return err
	})
	if err != nil {
		return 0, err
	}
	return LeaseID(resp.GetId()), nil
}

// Revoke ends a lease and deletes the keys attached to it; it returns
// once they are deleted, with how many were. A lease that does not exist
// is ErrNotFound.
//
// Retrying a Revoke that failed with an unknown outcome (a timeout) is
// safe: while the first is still running or its keys are not all
// deleted, the retry finishes the job and answers as the first would
// have. Once the keys are deleted the lease no longer exists, and a
// retry answers ErrNotFound: after a failed Revoke, ErrNotFound from
// the retry means the lease is gone.
func (c *Client) Revoke(ctx context.Context, id LeaseID) (uint64, error) {
	var resp *kvpb.LeaseRevokeResponse
	err := c.do(ctx, "Revoke", true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = c.lease(e).Revoke(ctx, &kvpb.LeaseRevokeRequest{Id: uint64(id)})
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.GetKeysDeleted(), nil
}

// TimeToLive describes a lease, with its keys if keys is set. A lease
// that does not exist is ErrNotFound.
func (c *Client) TimeToLive(ctx context.Context, id LeaseID, keys bool) (LeaseInfo, error) {
	var resp *kvpb.LeaseTimeToLiveResponse
	err := c.do(ctx, "TimeToLive", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = c.lease(e).TimeToLive(ctx, &kvpb.LeaseTimeToLiveRequest{Id: uint64(id), Keys: keys})
		return err
	})
	if err != nil {
		return LeaseInfo{}, err
	}
	return LeaseInfo{ID: LeaseID(resp.GetId()), TTL: time.Duration(resp.GetTtlMs()) * time.Millisecond,
		Remaining: time.Duration(resp.GetRemainingMs()) * time.Millisecond, Keys: resp.GetKeys()}, nil
}

// Leases lists the live leases.
func (c *Client) Leases(ctx context.Context) ([]LeaseInfo, error) {
	var resp *kvpb.LeaseLeasesResponse
	err := c.do(ctx, "Leases", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = c.lease(e).Leases(ctx, &kvpb.LeaseLeasesRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]LeaseInfo, 0, len(resp.GetLeases()))
	for _, l := range resp.GetLeases() {
		out = append(out, LeaseInfo{ID: LeaseID(l.GetId()), TTL: time.Duration(l.GetTtlMs()) * time.Millisecond,
			Remaining: time.Duration(l.GetRemainingMs()) * time.Millisecond})
	}
	return out, nil
}

// KeepAliveOnce renews a lease once: on success it expires no earlier
// than the returned TTL after the call was made. A lease that does not
// exist (never granted, expired, revoked) is ErrNotFound. The request
// rides the endpoint's KeepAlive stream that all of the client's leases
// share (lease_stream.go).
func (c *Client) KeepAliveOnce(ctx context.Context, id LeaseID) (time.Duration, error) {
	var resp *kvpb.LeaseKeepAliveResponse
	err := c.do(ctx, "KeepAlive", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = c.renewShared(ctx, e, id) // lease_stream.go
		return err
	})
	if err != nil {
		return 0, err
	}
	if !resp.GetFound() {
		return 0, &Error{Op: "KeepAlive", Msg: resp.GetMessage(), kind: ErrNotFound}
	}
	return time.Duration(resp.GetTtlMs()) * time.Millisecond, nil
}

// LeaseKeepAlive reports one acknowledged keep-alive of KeepAlive, or
// (Err set, the channel's last value) why it stopped.
type LeaseKeepAlive struct {
	ID LeaseID
	// Sent is when the acknowledged keep-alive was sent: the lease lives
	// at least until Sent + TTL.
	Sent time.Time
	TTL  time.Duration
	Err  error
}

// KeepAlive keeps a lease alive until ctx ends or the lease is gone:
// it renews it every third of its TTL (sooner after a failure) and
// reports each acknowledged renewal on the channel, dropping reports the
// caller is too slow to take. The channel is closed when it stops; the
// last value says why when the lease was lost (ErrNotFound: expired or
// revoked). The first renewal happens before KeepAlive returns, and its
// failure is returned.
func (c *Client) KeepAlive(ctx context.Context, id LeaseID) (<-chan LeaseKeepAlive, error) {
	sent := time.Now()
	ttl, err := c.KeepAliveOnce(ctx, id)
	if err != nil {
		return nil, err
	}
	ch := make(chan LeaseKeepAlive, 16)
	ch <- LeaseKeepAlive{ID: id, Sent: sent, TTL: ttl}
	go func() {
		defer close(ch)
		next := ttl / 3
		for {
			t := time.NewTimer(next)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			sent := time.Now()
			got, err := c.KeepAliveOnce(ctx, id)
			switch {
			case err == nil:
				ttl, next = got, got/3
				select {
				case ch <- LeaseKeepAlive{ID: id, Sent: sent, TTL: got}:
				default:
				}
			case errors.Is(err, ErrNotFound):
				select {
				case ch <- LeaseKeepAlive{ID: id, Err: err}:
				case <-ctx.Done():
				}
				return
			case ctx.Err() != nil:
				return
			default:
				// Retry sooner, while the lease is surely alive.
				next = max(ttl/10, 50*time.Millisecond)
			}
		}
	}()
	return ch, nil
}
