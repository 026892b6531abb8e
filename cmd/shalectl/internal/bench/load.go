package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// loadBatch is the number of keys written per request while loading:
// under etcd's default limit of 128 operations per transaction.
const loadBatch = 100

// loadAttempts bounds the tries of one load batch. A batch rewrites the
// same keys with the same values, so trying it again after a failure whose
// outcome is unknown (say, a write slower than the client's per-attempt
// timeout on a busy machine) is safe.
const loadAttempts = 5

// load writes n items, item i made by gen, in batches of loadBatch spread
// over the drivers with one goroutine per client. It stops at the first
// batch that fails loadAttempts times.
func load(ctx context.Context, cfg *Config, drivers []Driver, n int64, gen func(i int64, r *rand.Rand) (key, value []byte)) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Clients)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for c := range cfg.Clients {
		d := drivers[c%len(drivers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(cfg.Seed, uint64(c)+1<<32))
			for {
				first := next.Add(loadBatch) - loadBatch
				if first >= n || ctx.Err() != nil {
					return
				}
				end := min(first+loadBatch, n)
				keys := make([][]byte, 0, end-first)
				values := make([][]byte, 0, end-first)
				for i := first; i < end; i++ {
					k, v := gen(i, r)
					keys, values = append(keys, k), append(values, v)
				}
				var err error
				for range loadAttempts {
					octx, ocancel := context.WithTimeout(ctx, cfg.OpTimeout)
					err = d.PutMany(octx, keys, values)
					ocancel()
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errs <- fmt.Errorf("loading items %d..%d: %w", first, end-1, err)
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// loadKeys writes every key of the key space with a fresh value.
func loadKeys(ctx context.Context, cfg *Config, drivers []Driver) error {
	return load(ctx, cfg, drivers, cfg.Keys, func(i int64, r *rand.Rand) ([]byte, []byte) {
		v := make([]byte, cfg.ValueSize)
		fillValue(v, r)
		return appendKey(nil, i, cfg.KeySize), v
	})
}

// loadDirs writes the directory tree of dirwalk.
func loadDirs(ctx context.Context, cfg *Config, drivers []Driver) error {
	f := int64(cfg.DirFanout)
	return load(ctx, cfg, drivers, dirCount(cfg.DirFanout, cfg.DirDepth), func(i int64, r *rand.Rand) ([]byte, []byte) {
		inode := i + 1 // the root (0) is not stored
		parent, c := (inode-1)/f, int((inode-1)%f)
		return dirKey(nil, uint64(parent), c), dirValue(uint64(inode), cfg.ValueSize, r)
	})
}
