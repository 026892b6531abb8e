package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/client"
)

// shaleDriver drives Shale through the client library, as an application
// would: routing, leader following and retries included.
type shaleDriver struct {
	c *client.Client
}

// openShale dials endpoints with opts (a copy: Dial fills in defaults).
func openShale(ctx context.Context, endpoints []string, opts client.Options) (Driver, error) {
	c, err := client.Dial(ctx, endpoints, &opts)
	if err != nil {
		return nil, fmt.Errorf("dial shale %v: %w", endpoints, err)
	}
	return &shaleDriver{c: c}, nil
}

func (d *shaleDriver) Put(ctx context.Context, key, value []byte) error {
	return d.c.Put(ctx, key, value)
}

func (d *shaleDriver) PutMany(ctx context.Context, keys, values [][]byte) error {
	muts := make([]client.Mutation, len(keys))
	for i := range keys {
		muts[i] = client.PutOp(keys[i], values[i])
	}
	err := d.c.Batch(ctx, muts...)
	if errors.Is(err, client.ErrBatchSpansRanges) {
		// A range split inside the batch's keys (a split by load during
		// the load itself): loading needs no atomicity, so write them
		// one by one.
		for i := range keys {
			if err := d.c.Put(ctx, keys[i], values[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return err
}

func (d *shaleDriver) Get(ctx context.Context, key []byte, stale bool) ([]byte, bool, error) {
	if stale {
		return d.c.Get(ctx, key, client.StaleRead(StaleBound))
	}
	return d.c.Get(ctx, key)
}

func (d *shaleDriver) GetMany(ctx context.Context, keys [][]byte, stale bool) (int, error) {
	var res []client.GetResult
	var err error
	if stale {
		res, err = d.c.BatchGet(ctx, keys, client.StaleRead(StaleBound))
	} else {
		res, err = d.c.BatchGet(ctx, keys)
	}
	if err != nil {
		return 0, err
	}
	found := 0
	for _, r := range res {
		if r.Found {
			found++
		}
	}
	return found, nil
}

func (d *shaleDriver) Scan(ctx context.Context, start []byte, limit int) (int, error) {
	n := 0
	opts := &client.ScanOptions{Limit: limit, PageSize: uint32(limit)}
	for _, err := range d.c.Scan(ctx, start, nil, opts) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (d *shaleDriver) Grant(ctx context.Context, ttl time.Duration) (uint64, error) {
	id, err := d.c.Grant(ctx, ttl)
	return uint64(id), err
}

func (d *shaleDriver) KeepAliveOnce(ctx context.Context, id uint64) error {
	_, err := d.c.KeepAliveOnce(ctx, client.LeaseID(id))
	return err
}

func (d *shaleDriver) Close() error { return d.c.Close() }
