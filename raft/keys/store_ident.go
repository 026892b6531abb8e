package keys

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// StoreIdentKey holds the store's identity: node-local, under range ID 0
// (never a range's), so it sorts before every per-range node-local key.
// Layout: 0x00, 8 zero bytes, "ident". DO NOT CHANGE.
var StoreIdentKey = append([]byte{NodeLocalPrefix, 0, 0, 0, 0, 0, 0, 0, 0}, "ident"...)

// StoreIdent says which node and cluster a store (data directory) belongs
// to, so that a node started on another node's directory refuses to run.
//
// The version byte is also the store format version: what the rest of
// the engine's keys mean. Format 1 kept user data as plain 0x03 user_key
// entries; format 2 keeps it as versioned keys (UserKeyspace,
// docs/versions.md). A build reads one store format: a store of another is
// refused at open (ErrStoreFormat) and nothing on disk is changed.
//
// Encoding (DO NOT CHANGE a version's layout, add a version):
//
//	ident := version: 0x02, node_id: uvarint, cluster_id_len: uvarint, cluster_id
type StoreIdent struct {
	NodeID    uint64
	ClusterID string
}

// StoreFormat is the store format this build writes and reads.
const StoreFormat = 2

const storeIdentVersion = StoreFormat

// ErrStoreFormat is returned (wrapped) for a store written in a format this
// build does not read.
var ErrStoreFormat = errors.New("keys: unsupported store format")

// Encode returns the stored form of the identity.
func (s StoreIdent) Encode() []byte {
	b := []byte{storeIdentVersion}
	b = binary.AppendUvarint(b, s.NodeID)
	b = binary.AppendUvarint(b, uint64(len(s.ClusterID)))
	return append(b, s.ClusterID...)
}

// DecodeStoreIdent parses a stored identity.
func DecodeStoreIdent(b []byte) (StoreIdent, error) {
	if len(b) == 0 {
		return StoreIdent{}, errors.New("keys: store ident: empty")
	}
	switch {
	case b[0] == 1:
		return StoreIdent{}, fmt.Errorf("%w: the store is format 1, written before versions (plain user keys); this build reads store format %d (versioned user keys) only and has changed nothing: start this node on an empty data directory and copy the data in through a client", ErrStoreFormat, StoreFormat)
	case b[0] != storeIdentVersion:
		return StoreIdent{}, fmt.Errorf("%w: the store is format %d; this build reads store format %d only and has changed nothing", ErrStoreFormat, b[0], StoreFormat)
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
