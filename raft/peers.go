package raft

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
