package keys

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// StoreIdentKey holds the store's identity: node-local, under range ID 0
// (never a range's), so it sorts before every per-range node-local key.
// Layout: 0x00, 8 zero bytes, "ident". DO NOT CHANGE.
var StoreIdentKey = append([]byte{NodeLocalPrefix, 0, 0, 0, 0, 0, 0, 0, 0}, "ident"...)

// StoreIdent says which node and cluster a store (data directory) belongs
// to, so that a node started on another node's directory refuses to run.
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
