package concurrency

import (
	"bytes"
	"context"
	"time"

	"github.com/shaledb/shale/client"
)

// waitPollMax caps the backoff of a waiting contender's own looks.
const waitPollMax = 500 * time.Millisecond

// waitFor waits until key, last seen at version v, is gone as the caller
// means it: polled says so of a read of the key, changed of a watch event
// of it. It watches the key from v, so no change after v is missed; it
// also looks itself with backoff (10 ms doubling to waitPollMax), and
// polls alone if the watch cannot start or ends, so a watch outage only
// slows it down. It fails with ErrSessionEnded when s ends first.
func waitFor(ctx context.Context, s *Session, key []byte, v client.Timestamp,
	polled func(client.GetResult) bool, changed func(client.WatchEvent) bool) error {
	gone := func() bool {
		r, err := s.c.GetVersioned(ctx, key)
		return err == nil && polled(r)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.c.Watch(wctx, key, append(bytes.Clone(key), 0), &client.WatchOptions{From: v})
	if err != nil {
		events = nil // poll only
	}
	wait := 10 * time.Millisecond
	for {
		if gone() {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-s.Done():
			t.Stop()
			return ErrSessionEnded
		case r, ok := <-events:
			t.Stop()
			if !ok || r.Err != nil {
				events = nil // poll only from now on
				continue
			}
			for _, e := range r.Events {
				if bytes.Equal(e.Key, key) && changed(e) {
					return nil
				}
			}
			continue // a progress notice: nothing changed yet
		case <-t.C:
		}
		wait = min(2*wait, waitPollMax)
	}
}
