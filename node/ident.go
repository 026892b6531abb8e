package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/shaledb/shale/internal/keys"
	"github.com/shaledb/shale/storage"
)

// loadOrCreateIdent reads the store's identity, writing a new one (with a
// fresh cluster ID) on first start. A store that belongs to another node is
// an error: starting on the wrong data directory would serve another
// node's data under this node's name.
func loadOrCreateIdent(db *storage.DB, nodeID uint64) (keys.StoreIdent, error) {
	v, err := db.Get(keys.StoreIdentKey)
	switch {
	case err == nil:
		ident, err := keys.DecodeStoreIdent(v)
		if err != nil {
			return keys.StoreIdent{}, fmt.Errorf("node: data directory %s: %w", db.Dir(), err)
		}
		if ident.NodeID != nodeID {
			return keys.StoreIdent{}, fmt.Errorf("node: data directory %s belongs to node %d, not node %d",
				db.Dir(), ident.NodeID, nodeID)
		}
		return ident, nil
	case errors.Is(err, storage.ErrNotFound):
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return keys.StoreIdent{}, fmt.Errorf("node: generating a cluster id: %w", err)
		}
		ident := keys.StoreIdent{NodeID: nodeID, ClusterID: hex.EncodeToString(id[:])}
		if err := db.Put(keys.StoreIdentKey, ident.Encode(), storage.Sync); err != nil {
			return keys.StoreIdent{}, fmt.Errorf("node: writing the store identity: %w", err)
		}
		return ident, nil
	default:
		return keys.StoreIdent{}, fmt.Errorf("node: reading the store identity: %w", err)
	}
}
