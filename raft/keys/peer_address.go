package keys

import (
	"encoding/binary"
	"fmt"
)

// Peer address book: node-local, one key per other node, holding the
// address this node last knew it at (docs/formats.md). A node that holds
// no copy of meta finds its peers through it after a restart.
//
//	peer address := 0x00 'n' node_id   -> address (UTF-8)
//
// DO NOT CHANGE: stored in every engine.
const peerAddressInfix = 'n'

// PeerAddressKey is the address book key of node nodeID.
func PeerAddressKey(nodeID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{NodeLocalPrefix, peerAddressInfix}, nodeID)
}

// PeerAddressSpan spans every address book key.
func PeerAddressSpan() Span {
	return Span{Start: []byte{NodeLocalPrefix, peerAddressInfix}, End: []byte{NodeLocalPrefix, peerAddressInfix + 1}}
}

// DecodePeerAddressKey returns the node ID of an address book key.
func DecodePeerAddressKey(key []byte) (uint64, error) {
	if len(key) != 10 || key[0] != NodeLocalPrefix || key[1] != peerAddressInfix {
		return 0, fmt.Errorf("keys: %x is not a peer address key", key)
	}
	return binary.BigEndian.Uint64(key[2:]), nil
}
