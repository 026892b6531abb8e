// Package keys defines the engine keyspace: how every layer that writes to a
// node's engine lays out its keys (docs/architecture.md, "Engine keyspace").
//
// The first byte of every engine key says what kind of key it is, so that
// each kind is one contiguous span that can be scanned, copied, dropped or
// snapshotted with span operations:
//
//	0x00  node-local   not replicated: store identity; per range, Raft
//	                   HardState, log entries, truncated state
//	0x01  range-local  replicated with the range: applied state,
//	                   descriptor, deduplication records
//	0x02  meta         range descriptors, addressed by their end key
//	0x03  user         0x03 + user key
//
// Node-local and range-local keys that belong to a range continue with the
// range ID as 8 big-endian bytes, so that one range's keys sort together.
// Range ID 0 is never assigned to a range: node-local keys under it belong
// to the store as a whole.
//
// These prefixes and the layouts below are stored on disk. DO NOT CHANGE
// THEM; add new kinds of keys under new suffixes.
package keys

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Prefixes of the engine keyspace. DO NOT CHANGE: they are on disk.
const (
	LocalPrefix      byte = 0x00
	RangeLocalPrefix byte = 0x01
	MetaPrefix       byte = 0x02
	UserPrefix       byte = 0x03
)

var (
	// UserSpanStart and UserSpanEnd bound every user key in the engine:
	// [0x03, 0x04).
	UserSpanStart = []byte{UserPrefix}
	UserSpanEnd   = []byte{UserPrefix + 1}
)

// StoreIdentKey holds the store's identity (StoreIdent): node-local, under
// range ID 0. Layout: 0x00, 8 zero bytes, "ident".
var StoreIdentKey = append(RangeIDPrefix(LocalPrefix, 0), "ident"...)

// RangeIDPrefix returns prefix followed by rangeID as 8 big-endian bytes:
// the start of one range's node-local or range-local keys.
func RangeIDPrefix(prefix byte, rangeID uint64) []byte {
	b := make([]byte, 9)
	b[0] = prefix
	binary.BigEndian.PutUint64(b[1:], rangeID)
	return b
}

// AppendUserKey appends the engine key of user key k to dst.
func AppendUserKey(dst, k []byte) []byte {
	dst = append(dst, UserPrefix)
	return append(dst, k...)
}

// UserKey returns the engine key of user key k.
func UserKey(k []byte) []byte {
	return AppendUserKey(make([]byte, 0, 1+len(k)), k)
}

// ErrNotUserKey is returned by DecodeUserKey for keys outside the user span.
var ErrNotUserKey = errors.New("keys: not a user key")

// DecodeUserKey returns the user key of an engine key, aliasing it.
func DecodeUserKey(ek []byte) ([]byte, error) {
	if len(ek) == 0 || ek[0] != UserPrefix {
		return nil, fmt.Errorf("%w: %q", ErrNotUserKey, ek)
	}
	return ek[1:], nil
}

// UserSpan returns the engine span [lo, hi) of the user span [start, end),
// where an empty start is the beginning of the user key space and an empty
// end its end.
func UserSpan(start, end []byte) (lo, hi []byte) {
	lo, hi = UserSpanStart, UserSpanEnd
	if len(start) > 0 {
		lo = UserKey(start)
	}
	if len(end) > 0 {
		hi = UserKey(end)
	}
	return lo, hi
}

// StoreIdent says which node a store (data directory) belongs to, so that a
// node started on another node's directory refuses to run.
//
// Encoding (version 1; DO NOT CHANGE, add a version):
//
//	ident := version: 0x01, node_id: uvarint, cluster_id_len: uvarint, cluster_id
type StoreIdent struct {
	NodeID    uint64
	ClusterID string
}

const storeIdentVersion = 1

// Encode returns the stored form of the identity.
func (s StoreIdent) Encode() []byte {
	b := []byte{storeIdentVersion}
	b = binary.AppendUvarint(b, s.NodeID)
	b = binary.AppendUvarint(b, uint64(len(s.ClusterID)))
	return append(b, s.ClusterID...)
}

// DecodeStoreIdent parses a stored identity.
func DecodeStoreIdent(b []byte) (StoreIdent, error) {
	if len(b) == 0 || b[0] != storeIdentVersion {
		return StoreIdent{}, fmt.Errorf("keys: store ident: unknown version in %x", b)
	}
	r := bytes.NewReader(b[1:])
	id, err := binary.ReadUvarint(r)
	if err != nil {
		return StoreIdent{}, fmt.Errorf("keys: store ident: node id: %w", err)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n != uint64(r.Len()) {
		return StoreIdent{}, fmt.Errorf("keys: store ident: cluster id length %d does not match the %d bytes left", n, r.Len())
	}
	return StoreIdent{NodeID: id, ClusterID: string(b[len(b)-int(n):])}, nil
}
