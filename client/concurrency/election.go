package concurrency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/client"
)

// Election elects one leader among the sessions that campaign under a key
// prefix, as etcd's concurrency.Election does. Each campaigner puts its
// own key, prefix + lease ID, holding its proposal and attached to its
// session's lease; the leader is the campaigner whose key has the lowest
// create version (ties, which need keys in two ranges written at one
// timestamp, go to the lower key). A campaigner waits for the key just
// ahead of its own to be deleted (by Resign, or with its session's lease),
// then looks again. The leader's key keeps its create version while the
// leader proclaims new values, so proclaiming never gives up the lead.
//
// Guarantees (docs/leases.md, "Elections"): at most one campaigner whose
// lease is alive believes it leads; leaders follow each other in the
// order of their keys' create versions, which is what Observe reports.
// As with a Mutex, a leader paused past its lease's TTL may still believe
// it leads: its key's create version (Rev) serves as a fencing token.
//
// An Election is used by one goroutine at a time.
type Election struct {
	s      *Session
	prefix []byte
	key    []byte           // our key while campaigning or leading
	rev    client.Timestamp // its create version, once leading
	ver    client.Timestamp // its newest version we know of (zero: read it)
}

// Leader is a leader's key and value, as Leader and Observe report them.
type Leader struct {
	Key   []byte
	Value []byte
	// Version is the leader's value's version (it rises with Proclaim);
	// CreateVersion is its key's, which orders the leaders.
	Version       client.Timestamp
	CreateVersion client.Timestamp
}

var (
	// ErrElectionNotLeader: Proclaim or Resign by a campaigner that does
	// not lead (never elected, resigned, or its key was deleted).
	ErrElectionNotLeader = errors.New("concurrency: not the election's leader")
	// ErrElectionNoLeader: Leader found nobody campaigning.
	ErrElectionNoLeader = errors.New("concurrency: the election has no leader")
)

// NewElection returns an election on prefix for session s.
func NewElection(s *Session, prefix string) *Election {
	return &Election{s: s, prefix: []byte(prefix + "/")}
}

// ResumeElection returns the election on prefix of a leader of session
// s known to hold key at create version rev (another process's Key and
// Rev), so that it can Proclaim and Resign.
func ResumeElection(s *Session, prefix string, key []byte, rev client.Timestamp) *Election {
	return &Election{s: s, prefix: []byte(prefix + "/"), key: bytes.Clone(key), rev: rev}
}

func (e *Election) end() []byte {
	return append(append([]byte(nil), e.prefix[:len(e.prefix)-1]...), '/'+1)
}

// Campaign puts the session's key with val and blocks until the session
// leads the election, ctx ends or the session's lease is lost. A session
// that campaigns again (with another Election on the same prefix) keeps
// its place and changes its value. On an error the session's key is
// deleted (best effort) and the session is no campaigner.
func (e *Election) Campaign(ctx context.Context, val []byte) error {
	c := e.s.c
	e.key = fmt.Appendf(append([]byte(nil), e.prefix...), "%016x", uint64(e.s.id))
	e.rev, e.ver = client.Timestamp{}, client.Timestamp{}
	if err := c.Put(ctx, e.key, val, client.WithLease(e.s.id)); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			err = ErrSessionEnded
		}
		e.key = nil
		return err
	}
	var mine client.Timestamp
	for {
		a, err := e.ahead(ctx)
		if err == nil && !mine.IsZero() && a.mine != mine {
			err = ErrSessionEnded // our key went and came back: we lost our place
		}
		if err != nil {
			e.abandon()
			return err
		}
		mine = a.mine
		if a.key == nil {
			e.rev, e.ver = mine, a.mineVer
			return nil
		}
		// Wait for the key ahead to be deleted: a new value (its holder
		// proclaiming) keeps its place, and a key made again after a
		// delete is a new one, so only a delete counts.
		err = waitFor(ctx, e.s, a.key, a.version,
			func(r client.GetResult) bool { return !r.Found || r.CreateVersion != a.create },
			func(ev client.WatchEvent) bool { return ev.Type == client.WatchDelete })
		if err != nil {
			e.abandon()
			return err
		}
	}
}

// aheadOf is what ahead found: our key's create version, and the key
// just ahead of it (nil if none) with its versions.
type aheadOf struct {
	mine    client.Timestamp
	mineVer client.Timestamp
	key     []byte
	version client.Timestamp
	create  client.Timestamp
}

// ahead finds the campaigner just ahead of ours: the highest create
// version below ours.
func (e *Election) ahead(ctx context.Context) (aheadOf, error) {
	var kvs []client.KeyValue
	found := false
	var a aheadOf
	for kv, err := range e.s.c.Scan(ctx, e.prefix, e.end(), nil) {
		if err != nil {
			return aheadOf{}, err
		}
		if bytes.Equal(kv.Key, e.key) {
			found, a.mine, a.mineVer = true, kv.CreateVersion, kv.Version
			continue
		}
		kvs = append(kvs, kv)
	}
	if !found {
		return aheadOf{}, ErrSessionEnded // our key went with the lease
	}
	for _, kv := range kvs {
		if !before(kv.Key, kv.CreateVersion, e.key, a.mine) {
			continue
		}
		if a.key == nil || before(a.key, a.create, kv.Key, kv.CreateVersion) {
			a.key, a.version, a.create = kv.Key, kv.Version, kv.CreateVersion
		}
	}
	return a, nil
}

// before orders campaigners: by create version, then by key.
func before(k1 []byte, v1 client.Timestamp, k2 []byte, v2 client.Timestamp) bool {
	return v1.Less(v2) || (v1 == v2 && bytes.Compare(k1, k2) < 0)
}

func (e *Election) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.s.c.Delete(ctx, e.key) //nolint:errcheck // best effort: the lease deletes it anyway
	e.key, e.rev, e.ver = nil, client.Timestamp{}, client.Timestamp{}
}

// Proclaim sets the leader's value without giving up the lead. It fails
// with ErrElectionNotLeader if this campaigner does not lead, and with
// ErrSessionEnded if its lease has ended.
//
// The value is one compare-and-swap on the leader's key, on the newest
// version the leader knows of, written with the session's lease: it
// writes only while the key is the leader's (a key deleted and made
// again has other versions), and a lease that ended fails it
// (client.ErrNotFound) and writes nothing. A comparison that fails on a
// key still holding the leader's create version is the leader's own
// earlier write it did not hear back from (a Proclaim that timed out):
// Proclaim takes that version and swaps again.
func (e *Election) Proclaim(ctx context.Context, val []byte) error {
	if e.key == nil || e.rev.IsZero() {
		return ErrElectionNotLeader
	}
	c := e.s.c
	for range 3 {
		if e.ver.IsZero() {
			r, err := c.GetVersioned(ctx, e.key)
			if err != nil {
				return err
			}
			if !r.Found || r.CreateVersion != e.rev {
				return ErrElectionNotLeader
			}
			e.ver = r.Version
		}
		res, err := c.CompareAndSwap(ctx, e.key, client.IfVersion(e.ver), val, client.WithLease(e.s.id))
		if err != nil {
			if errors.Is(err, client.ErrNotFound) {
				return ErrSessionEnded
			}
			return err
		}
		if res.Succeeded {
			e.ver = res.Version
			return nil
		}
		if !res.Found || res.CurrentCreateVersion != e.rev {
			return ErrElectionNotLeader
		}
		e.ver = res.CurrentVersion
	}
	return fmt.Errorf("concurrency: Proclaim: the leader's key %q keeps changing under it", e.key)
}

// Resign gives up the lead (or the campaign) by deleting the session's
// key; the next campaigner, if any, is elected. Resigning when not
// leading is a no-op.
func (e *Election) Resign(ctx context.Context) error {
	if e.key == nil {
		return nil
	}
	if err := e.s.c.Delete(ctx, e.key); err != nil {
		return err
	}
	e.key, e.rev, e.ver = nil, client.Timestamp{}, client.Timestamp{}
	return nil
}

// Key is the leader's key while this campaigner leads (nil otherwise).
func (e *Election) Key() []byte {
	if e.rev.IsZero() {
		return nil
	}
	return e.key
}

// Rev is the create version of the leader's key while this campaigner
// leads: it rises with every new leader, so it serves as a fencing token.
func (e *Election) Rev() client.Timestamp { return e.rev }

// Leader returns the current leader, or ErrElectionNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	l, _, err := e.leader(ctx)
	return l, err
}

// leader scans the prefix for the lowest create version, returning the
// timestamp the scan was served at.
func (e *Election) leader(ctx context.Context) (Leader, client.Timestamp, error) {
	var at client.Timestamp
	var l Leader
	for kv, err := range e.s.c.Scan(ctx, e.prefix, e.end(), nil, client.ServedAt(&at)) {
		if err != nil {
			return Leader{}, client.Timestamp{}, err
		}
		if l.Key == nil || before(kv.Key, kv.CreateVersion, l.Key, l.CreateVersion) {
			l = Leader{Key: kv.Key, Value: kv.Value, Version: kv.Version, CreateVersion: kv.CreateVersion}
		}
	}
	if l.Key == nil {
		return Leader{}, at, ErrElectionNoLeader
	}
	return l, at, nil
}

// Observe reports the election's leaders until ctx ends, when the channel
// closes: the current one (once there is one), then each new leader and
// each value a leader proclaims. It reads the leader, watches the prefix
// from the version it read at, and reads the leader again when anything
// under the prefix changes, so it may skip a leader that led only briefly
// but reports leaders in the order they were elected (create versions
// rising). A failed read or a watch that ends is retried with backoff.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go func() {
		defer close(out)
		var last Leader
		retry := 10 * time.Millisecond
		for ctx.Err() == nil {
			if err := e.observe(ctx, out, &last); err != nil && ctx.Err() == nil {
				t := time.NewTimer(retry)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
				retry = min(2*retry, waitPollMax)
				continue
			}
			retry = 10 * time.Millisecond
		}
	}()
	return out
}

// observe runs one watch of the prefix for Observe, sending each leader
// unlike *last; it returns when the watch fails or ctx ends.
func (e *Election) observe(ctx context.Context, out chan<- Leader, last *Leader) error {
	send := func(l Leader) bool {
		if bytes.Equal(l.Key, last.Key) && l.Version == last.Version {
			return true
		}
		select {
		case out <- l:
			*last = l
			return true
		case <-ctx.Done():
			return false
		}
	}
	l, at, err := e.leader(ctx)
	if err != nil && !errors.Is(err, ErrElectionNoLeader) {
		return err
	}
	if err == nil && !send(l) {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := &client.WatchOptions{From: at}
	events, err := e.s.c.Watch(wctx, e.prefix, e.end(), opts)
	if err != nil {
		return err
	}
	for r := range events {
		if r.Err != nil {
			return r.Err
		}
		if len(r.Events) == 0 {
			continue
		}
		l, _, err := e.leader(ctx)
		if errors.Is(err, ErrElectionNoLeader) {
			continue
		}
		if err != nil {
			return err
		}
		if !send(l) {
			return nil
		}
	}
	return ctx.Err()
}
