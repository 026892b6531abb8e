package node

import (
	"context"

	"github.com/shaledb/shale/storage"
)

// Committer makes an evaluated write durable and visible. Commit returns
// nil only once the batch is durable and every later read sees it; an
// error says whether the batch was applied (see writeError).
//
// The single-node committer writes the batch to the local engine with
// sync. The replicated path will propose the batch's bytes through the
// range's Raft group and return once the entry is committed and applied.
//
// REQUIRES: the caller holds the batch's latches until Commit returns.
type Committer interface {
	Commit(ctx context.Context, b *storage.Batch) error
}

// engineCommitter commits straight to the local engine: a synced write,
// sharing its fsync with concurrent writers (the engine's group commit).
type engineCommitter struct {
	db *storage.DB
}

func (c engineCommitter) Commit(ctx context.Context, b *storage.Batch) error {
	// Once the engine write starts it cannot be abandoned, so the context
	// is checked only before it.
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.db.Write(b, storage.Sync)
}
