package bench

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdDriver drives etcd through its own Go client with the same
// operations: Get is linearizable by default in etcd too, and stale reads
// use WithSerializable (served by any member from its local state).
type etcdDriver struct {
	c *clientv3.Client
}

func openEtcd(ctx context.Context, endpoints []string) (Driver, error) {
	dl, ok := ctx.Deadline()
	timeout := 5 * time.Second
	if ok {
		timeout = time.Until(dl)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: timeout,
		Context:     context.WithoutCancel(ctx),
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("dial etcd %v: %w", endpoints, err)
	}
	// clientv3.New does not wait for a connection: probe one, so that a
	// wrong address fails here and not as errors in the results.
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := c.Get(pctx, "shale-bench-probe", clientv3.WithSerializable()); err != nil {
		c.Close()
		return nil, fmt.Errorf("etcd %v does not answer: %w", endpoints, err)
	}
	return &etcdDriver{c: c}, nil
}

func (d *etcdDriver) Put(ctx context.Context, key, value []byte) error {
	_, err := d.c.Put(ctx, string(key), string(value))
	return err
}

func (d *etcdDriver) PutMany(ctx context.Context, keys, values [][]byte) error {
	ops := make([]clientv3.Op, len(keys))
	for i := range keys {
		ops[i] = clientv3.OpPut(string(keys[i]), string(values[i]))
	}
	_, err := d.c.Txn(ctx).Then(ops...).Commit()
	return err
}

func (d *etcdDriver) Get(ctx context.Context, key []byte, stale bool) ([]byte, bool, error) {
	var opts []clientv3.OpOption
	if stale {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := d.c.Get(ctx, string(key), opts...)
	if err != nil {
		return nil, false, err
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

// GetMany is one read-only transaction of gets: etcd's way to read many
// keys at one revision in one request (etcd allows 128 operations per
// transaction by default).
func (d *etcdDriver) GetMany(ctx context.Context, keys [][]byte, stale bool) (int, error) {
	var opts []clientv3.OpOption
	if stale {
		opts = append(opts, clientv3.WithSerializable())
	}
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(string(k), opts...)
	}
	resp, err := d.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, err
	}
	found := 0
	for _, r := range resp.Responses {
		if rr := r.GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			found++
		}
	}
	return found, nil
}

func (d *etcdDriver) Scan(ctx context.Context, start []byte, limit int) (int, error) {
	resp, err := d.c.Get(ctx, string(start), clientv3.WithFromKey(), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return 0, err
	}
	return len(resp.Kvs), nil
}

func (d *etcdDriver) Grant(ctx context.Context, ttl time.Duration) (uint64, error) {
	resp, err := d.c.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return 0, err
	}
	return uint64(resp.ID), nil
}

func (d *etcdDriver) KeepAliveOnce(ctx context.Context, id uint64) error {
	_, err := d.c.KeepAliveOnce(ctx, clientv3.LeaseID(id))
	return err
}

func (d *etcdDriver) Close() error { return d.c.Close() }
