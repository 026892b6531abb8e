package client

import (
	"crypto/tls"
	"time"

	"google.golang.org/grpc"
)

// Options configure a Client. The zero value (or nil) gives the defaults
// listed beside each field.
type Options struct {
	// DialTimeout bounds Dial's wait for a first connection when its
	// context has no deadline (5s).
	DialTimeout time.Duration
	// RequestTimeout is the deadline of a request whose context has none
	// (10s). Every request has a deadline.
	RequestTimeout time.Duration
	// AttemptTimeout bounds one attempt of a request at one node (1s),
	// below the request's deadline, so that a node that stopped answering
	// without dropping its connections (paused, stalled) costs one
	// attempt instead of the whole deadline: the request then goes to
	// another replica, and the node is avoided for a while. Each further
	// attempt of the same request that times out gets twice as long (at
	// most 16 times AttemptTimeout), so a request that is merely slow
	// still completes. Set it to about the cluster's election timeout
	// (--raft-tick times 10: the default 1s is right for the default
	// tick); a smaller value fails over faster, a larger one tolerates
	// slower nodes. A write whose attempt timed out is retried with the
	// same identity, which the cluster applies at most once; if no later
	// attempt succeeds, it fails as ErrAmbiguous.
	AttemptTimeout time.Duration
	// HedgeDelay is how long a read (Get, BatchGet, a Scan page) waits
	// for an answer from the node it was sent to before it is also sent
	// to the next candidate (hedge.go): for a linearizable read, the
	// leader the client knows now if another, else another voter (which
	// may have become leader, or names it); for a stale read, another
	// replica. The first good answer wins and the others are cancelled;
	// at most two such extra requests per attempt, one HedgeDelay apart.
	// Default: a quarter of AttemptTimeout (250ms), well above a healthy
	// read's latency, so hedges go out only for a node that is stalled,
	// paused or overloaded. Negative: no hedging.
	HedgeDelay time.Duration
	// MaxKeySize and MaxValueSize are the cluster's key and value size
	// limits (8 KiB and 4 MiB, the nodes' defaults: set them to the
	// nodes' --max-key-size and --max-value-size if those were changed;
	// negative: no check). A key or value over them is refused before it
	// is sent, with ErrInvalidArgument naming the limit, as a node would.
	MaxKeySize   int
	MaxValueSize int
	// MaxBackoff caps the wait between retries (1s). Retries start at 10ms,
	// double, and are jittered; they stop at the request's deadline.
	MaxBackoff time.Duration
	// ScanPageSize is the number of entries a Scan fetches per request
	// (1000).
	ScanPageSize uint32
	// TLS, when set, secures every connection (LoadTLSConfig builds one
	// from the cluster CA and a client certificate). Nil is plaintext, for
	// nodes in insecure mode only.
	TLS *tls.Config
	// Token is a bearer token sent with every request (needs TLS); the
	// role the cluster's token file gives it decides what the client may
	// do.
	Token string
	// ClusterID, when set, is sent with every call (kvpb.ClusterIDMetadata),
	// and a node of another cluster refuses the call with an error naming
	// both clusters instead of serving it: a guard against endpoints that
	// point at the wrong cluster (`shalectl status` shows a cluster's ID).
	// Empty: calls name no cluster.
	ClusterID string
	// DialOptions are added to the gRPC dial options.
	DialOptions []grpc.DialOption
	// DisableMultiplexing sends every KV call as its own unary RPC instead
	// of as a frame on the connection's one KV.Multiplex stream (false:
	// multiplexed). Multiplexing costs less CPU per call on both sides;
	// the client falls back to unary RPCs by itself against a node that
	// does not offer it. Errors and their meaning are the same either way.
	DisableMultiplexing bool
	// TxnTestingKnobs are hooks into a commit across ranges for tests
	// that make its races happen on purpose against real nodes; nil
	// outside tests.
	TxnTestingKnobs *TxnTestingKnobs
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.DialTimeout <= 0 {
		r.DialTimeout = 5 * time.Second
	}
	if r.RequestTimeout <= 0 {
		r.RequestTimeout = 10 * time.Second
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = time.Second
	}
	if r.HedgeDelay == 0 {
		r.HedgeDelay = r.AttemptTimeout / 4
	}
	if r.MaxKeySize == 0 {
		r.MaxKeySize = 8 << 10
	}
	if r.MaxValueSize == 0 {
		r.MaxValueSize = 4 << 20
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = time.Second
	}
	if r.ScanPageSize == 0 {
		r.ScanPageSize = 1000
	}
	return r
}

// maxMessageSize is the largest gRPC message the client sends or accepts:
// comfortably above the largest response the protocol allows (a BatchGet of
// 32 MiB of values, or a scan page with one 4 MiB value over max_bytes).
const maxMessageSize = 64 << 20
