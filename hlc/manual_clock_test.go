package hlc

import (
	"sync"
	"time"
)

// manualClock is a PhysicalClock the test moves by hand, backwards too.
type manualClock struct {
	mu  sync.Mutex
	now int64
}

func (m *manualClock) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Unix(0, m.now)
}

func (m *manualClock) Set(nanos int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = nanos
}

func (m *manualClock) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now += int64(d)
}
