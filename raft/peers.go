package raft

import (
	"fmt"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// The peer address book: every address this store learns (given at
// start, from a join, from meta's node registry) is also written to the
// engine under a node-local key (keys.PeerAddressKey), and read back when
// the store opens. Without it a node that holds no copy of meta, restarted
// without its start-up peer list (a node that joined, or one restarted
// with only its data directory), knew no other node: it could neither
// reach a meta replica to learn addresses nor send its own ranges' Raft
// messages, and stayed cut off.

// loadPeerAddresses reads the address book.
func loadPeerAddresses(db *storage.DB) (map[uint64]string, error) {
	span := keys.PeerAddressSpan()
	it, err := db.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return nil, fmt.Errorf("raft: reading the peer address book: %w", err)
	}
	defer it.Close()
	out := map[uint64]string{}
	for ok := it.First(); ok; ok = it.Next() {
		id, err := keys.DecodePeerAddressKey(it.UnsafeKey())
		if err != nil {
			return nil, fmt.Errorf("raft: reading the peer address book: %w", err)
		}
		out[id] = string(it.UnsafeValue())
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("raft: reading the peer address book: %w", err)
	}
	return out, nil
}

// SetPeerAddress records (or updates) the address of a node, in memory
// and, when it changed, in the address book. The book is a hint (meta's
// registry is the truth), so a failed write is logged, not fatal.
func (s *Store) SetPeerAddress(nodeID uint64, addr string) {
	s.peers.Lock()
	defer s.peers.Unlock()
	if old, ok := s.peers.addrs[nodeID]; ok && old == addr {
		return
	}
	s.peers.addrs[nodeID] = addr
	// Written under the lock so that two updates of one node reach the
	// engine in the order they were made.
	if err := s.cfg.Engine.Put(keys.PeerAddressKey(nodeID), []byte(addr), storage.NoSync); err != nil && s.cfg.Logger != nil {
		s.cfg.Logger.Warn("recording a peer address", "node", nodeID, "address", addr, "err", err)
	}
}

// PeerAddresses returns the node addresses this store knows without meta:
// those given at start and those recorded since with SetPeerAddress. A node
// that holds no copy of meta (or has just lost it) can still find the
// other nodes through them.
func (s *Store) PeerAddresses() map[uint64]string {
	s.peers.RLock()
	defer s.peers.RUnlock()
	out := make(map[uint64]string, len(s.peers.addrs))
	for id, a := range s.peers.addrs {
		out[id] = a
	}
	return out
}
