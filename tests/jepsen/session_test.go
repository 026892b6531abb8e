package jepsen

import (
	"sync"

	"github.com/shaledb/shale/client"
)

// session is a worker's client, dialled again (to the current members)
// when the membership nemesis has changed the cluster since it was made.
type session struct {
	c   *cluster
	t   testTB
	mu  sync.Mutex
	cl  *client.Client
	ver uint64
}

// testTB is the part of testing.TB a session needs.
type testTB interface {
	Logf(format string, args ...any)
}

func newSession(c *cluster, t testTB) (*session, error) {
	s := &session{c: c, t: t}
	ver := c.version.Load()
	cl, err := c.dial(opTimeout)
	if err != nil {
		return nil, err
	}
	s.cl, s.ver = cl, ver
	return s, nil
}

// get returns the session's client, redialling first if the membership
// changed. If redialling fails the old client is kept: it still reaches
// whichever of its nodes remain.
func (s *session) get() *client.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ver := s.c.version.Load(); ver != s.ver {
		cl, err := s.c.dial(opTimeout)
		if err != nil {
			s.t.Logf("redialling after a membership change: %v (keeping the old client)", err)
			s.ver = ver
			return s.cl
		}
		s.cl.Close()
		s.cl, s.ver = cl, ver
	}
	return s.cl
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cl.Close()
}
