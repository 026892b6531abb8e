package storage

/*
#include "shale/engine.h"
*/
import "C"

// SyncWAL makes every write that returned before the call durable, like a
// Write with Sync, but without holding the engine's write queue while the
// fsync runs: writes without Sync go on meanwhile. A writer that must not
// make others wait behind its fsyncs writes with NoSync, then calls
// SyncWAL. A failed sync stops writes until Resume, as a failed synced
// write does.
func (db *DB) SyncWAL() error {
	h, err := db.handle("SyncWAL")
	if err != nil {
		return err
	}
	st := C.shale_sync_wal(h)
	db.mu.RUnlock()
	return statusToError("SyncWAL", st)
}
