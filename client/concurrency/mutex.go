package concurrency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/client"
)

// Mutex is a distributed lock named by a key prefix. Each contender puts
// its own key, prefix + lease ID, attached to its session's lease; the
// holder is the contender whose key has the lowest version (ties, which
// need keys in two ranges written at one timestamp, go to the lower
// key). A contender waits for every key below its own to go: deleted by
// Unlock, or with its session's lease.
//
// Waiting watches the key ahead (client.Watch) and, as a safety net,
// looks at it with backoff up to waitPollMax.
type Mutex struct {
	s      *Session
	prefix []byte
	key    []byte
	token  client.Timestamp
}

// NewMutex returns a mutex on prefix for session s.
func NewMutex(s *Session, prefix string) *Mutex {
	return &Mutex{s: s, prefix: []byte(prefix + "/")}
}

// ErrSessionEnded is returned when the session's lease was lost.
var ErrSessionEnded = errors.New("concurrency: the session's lease has ended")

// Lock blocks until the session holds the mutex or ctx ends. On an error
// the session's key is deleted (best effort).
func (m *Mutex) Lock(ctx context.Context) error {
	c := m.s.c
	m.key = fmt.Appendf(append([]byte(nil), m.prefix...), "%016x", uint64(m.s.id))
	v, err := c.PutVersioned(ctx, m.key, nil, client.WithLease(m.s.id))
	if err != nil {
		return err
	}
	for {
		ahead, aheadV, err := m.ahead(ctx, v)
		if err != nil {
			m.abandon()
			return err
		}
		if ahead == nil {
			m.token = v
			return nil
		}
		if err := m.waitGone(ctx, ahead, aheadV); err != nil {
			m.abandon()
			return err
		}
	}
}

// ahead returns the key of the contender just ahead of ours (whose
// version is the highest below ours) and its version, or nil if ours is
// the lowest.
func (m *Mutex) ahead(ctx context.Context, mine client.Timestamp) ([]byte, client.Timestamp, error) {
	end := append(append([]byte(nil), m.prefix[:len(m.prefix)-1]...), '/'+1)
	var best []byte
	var bestV client.Timestamp
	found := false
	for kv, err := range m.s.c.Scan(ctx, m.prefix, end, nil) {
		if err != nil {
			return nil, client.Timestamp{}, err
		}
		if bytes.Equal(kv.Key, m.key) {
			found = true
			continue
		}
		below := kv.Version.Less(mine) || (kv.Version == mine && bytes.Compare(kv.Key, m.key) < 0)
		if below && (best == nil || bestV.Less(kv.Version)) {
			best, bestV = kv.Key, kv.Version
		}
	}
	if !found {
		return nil, client.Timestamp{}, ErrSessionEnded // our key went with the lease
	}
	return best, bestV, nil
}

// waitGone waits until key's version v is gone: deleted, or replaced by
// a new version (its holder unlocked and queued again, behind us).
func (m *Mutex) waitGone(ctx context.Context, key []byte, v client.Timestamp) error {
	return waitFor(ctx, m.s, key, v,
		func(r client.GetResult) bool { return !r.Found || r.Version != v },
		func(e client.WatchEvent) bool { return e.Version != v })
}

func (m *Mutex) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.s.c.Delete(ctx, m.key) //nolint:errcheck // best effort: the lease deletes it anyway
}

// Token is the holder's fencing token: the version of its key. Every
// later holder's token is higher.
func (m *Mutex) Token() client.Timestamp { return m.token }

// Key is the session's key under the prefix.
func (m *Mutex) Key() []byte { return m.key }

// Unlock releases the mutex by deleting the session's key.
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.key == nil {
		return errors.New("concurrency: Unlock of a mutex not locked")
	}
	err := m.s.c.Delete(ctx, m.key)
	if err == nil {
		m.key, m.token = nil, client.Timestamp{}
	}
	return err
}
