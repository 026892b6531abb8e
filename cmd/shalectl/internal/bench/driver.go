package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/shaledb/shale/client"
)

// Driver is one connection to the system under test. A Driver is used by
// many workers at once, so its methods must be safe for concurrent use.
type Driver interface {
	// Put sets key to value; it returns once the write is durable.
	Put(ctx context.Context, key, value []byte) error
	// PutMany sets keys[i] to values[i] in one request (used to load
	// data; at most 100 keys).
	PutMany(ctx context.Context, keys, values [][]byte) error
	// Get reads key, linearizable unless stale.
	Get(ctx context.Context, key []byte, stale bool) (value []byte, found bool, err error)
	// GetMany reads keys in one request and returns how many were found.
	GetMany(ctx context.Context, keys [][]byte, stale bool) (found int, err error)
	// Scan reads up to limit entries from start on, in key order, in one
	// request, and returns how many it read.
	Scan(ctx context.Context, start []byte, limit int) (n int, err error)
	// Close releases the connection.
	Close() error
}

// Target names the system under test: "shale" (the default) or
// "etcd://host:port[,host:port...]".
type Target struct {
	// System is "shale" or "etcd".
	System string
	// Endpoints are the addresses to dial (for etcd, from the target
	// itself; for shale, from --endpoints).
	Endpoints []string
	// Shale holds the client options for a shale target: shalectl's TLS
	// and bearer-token settings (so a secure cluster can be measured) and
	// --no-multiplex.
	Shale client.Options
}

// ParseTarget parses a --target value. endpoints are the shale endpoints,
// used when target is "" or "shale".
func ParseTarget(target string, endpoints []string) (Target, error) {
	switch {
	case target == "" || target == "shale":
		if len(endpoints) == 0 {
			return Target{}, fmt.Errorf("no shale endpoints given (--endpoints)")
		}
		return Target{System: "shale", Endpoints: endpoints}, nil
	case strings.HasPrefix(target, "shale://"):
		eps := splitList(strings.TrimPrefix(target, "shale://"))
		if len(eps) == 0 {
			return Target{}, fmt.Errorf("--target %q names no host:port", target)
		}
		return Target{System: "shale", Endpoints: eps}, nil
	case strings.HasPrefix(target, "etcd://"):
		eps := splitList(strings.TrimPrefix(target, "etcd://"))
		if len(eps) == 0 {
			return Target{}, fmt.Errorf("--target %q names no host:port", target)
		}
		return Target{System: "etcd", Endpoints: eps}, nil
	default:
		return Target{}, fmt.Errorf("--target %q: want shale, shale://host:port[,...] or etcd://host:port[,...]", target)
	}
}

// Open connects one Driver to t. Connection i lists the endpoints rotated
// by i, so that connections (and stale reads) spread over every node.
func Open(ctx context.Context, t Target, i int) (Driver, error) {
	eps := make([]string, len(t.Endpoints))
	for j := range eps {
		eps[j] = t.Endpoints[(i+j)%len(t.Endpoints)]
	}
	switch t.System {
	case "shale":
		return openShale(ctx, eps, t.Shale)
	case "etcd":
		return openEtcd(ctx, eps)
	default:
		return nil, fmt.Errorf("unknown target system %q", t.System)
	}
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
