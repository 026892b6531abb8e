package concurrency

import (
	"context"
	"sync"
	"time"

	"github.com/shaledb/shale/client"
)

// Session is a lease kept alive in the background until Close or until
// the lease is lost.
type Session struct {
	c      *client.Client
	id     client.LeaseID
	ttl    time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	lastSent time.Time // send of the last acknowledged keep-alive (or grant)
	err      error     // why the session ended
}

// NewSession grants a lease of ttl and keeps it alive.
func NewSession(ctx context.Context, c *client.Client, ttl time.Duration) (*Session, error) {
	sent := time.Now()
	id, err := c.Grant(ctx, ttl)
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	acks, err := c.KeepAlive(kctx, id)
	if err != nil {
		cancel()
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.Revoke(rctx, id) //nolint:errcheck // best effort: the lease expires anyway
		rcancel()
		return nil, err
	}
	s := &Session{c: c, id: id, ttl: ttl, cancel: cancel, done: make(chan struct{}), lastSent: sent}
	go func() {
		defer close(s.done)
		for a := range acks {
			s.mu.Lock()
			if a.Err != nil {
				s.err = a.Err
			} else if a.Sent.After(s.lastSent) {
				s.lastSent = a.Sent
			}
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Lease is the session's lease.
func (s *Session) Lease() client.LeaseID { return s.id }

// Done is closed when the session ends: Close, or its lease was lost.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended (nil while it lives or after Close).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// AliveUntil is the earliest the lease may expire: its TTL after the send
// of the last acknowledged keep-alive. Past it the session may have lost
// everything it holds.
func (s *Session) AliveUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSent.Add(s.ttl)
}

// Close stops keeping the lease alive and revokes it, deleting every key
// the session holds.
func (s *Session) Close(ctx context.Context) error {
	s.cancel()
	<-s.done
	_, err := s.c.Revoke(ctx, s.id)
	return err
}
