package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
)

// opKind is the kind of one request, each with its own histogram.
type opKind int

const (
	opWrite opKind = iota
	opRead
	opMultiGet
	opScan
	opWalk
	opKeepAlive
	numOpKinds
)

var opNames = [numOpKinds]string{"write", "read", "multiget", "scan", "walk", "keepalive"}

// String returns the name used in reports.
func (k opKind) String() string { return opNames[k] }

// step issues one request of a worker and says what it was: its kind and
// the keys it wrote or read. Found counts keys that were read and existed.
type step func(ctx context.Context) (kind opKind, items, found int, err error)

// worker is one client's private state: it is used by one goroutine.
type worker struct {
	id    int
	cfg   *Config
	d     Driver
	r     *rand.Rand
	key   []byte
	value []byte
	keys  [][]byte
	zipf  *zipfKeys
	seq   *atomic.Int64 // fillseq: next index, shared by all workers
	// wait, if set, runs before each step, outside its latency (the
	// leases workload's pacing).
	wait func(context.Context)
}

func newWorker(id int, cfg *Config, d Driver, seed uint64, seq *atomic.Int64) *worker {
	w := &worker{id: id, cfg: cfg, d: d, r: rand.New(rand.NewPCG(seed, uint64(id))), seq: seq}
	w.value = make([]byte, cfg.ValueSize)
	w.keys = make([][]byte, cfg.BatchSize)
	for i := range w.keys {
		w.keys[i] = make([]byte, 0, cfg.KeySize)
	}
	w.zipf = newZipfKeys(w.r, cfg.Keys)
	return w
}

// stepFor returns the step of worker w for the configured workload.
func (w *worker) stepFor() (step, error) {
	switch w.cfg.Workload {
	case "put":
		return func(ctx context.Context) (opKind, int, int, error) {
			return w.put(ctx, w.r.Int64N(w.cfg.Keys))
		}, nil
	case "fillseq":
		return func(ctx context.Context) (opKind, int, int, error) {
			// Past the key space, fillseq wraps and overwrites.
			return w.put(ctx, (w.seq.Add(1)-1)%w.cfg.Keys)
		}, nil
	case "get", "readrandom":
		return func(ctx context.Context) (opKind, int, int, error) {
			return w.get(ctx, w.r.Int64N(w.cfg.Keys))
		}, nil
	case "ycsb-a", "ycsb-b":
		readPct := 50
		if w.cfg.Workload == "ycsb-b" {
			readPct = 95
		}
		return func(ctx context.Context) (opKind, int, int, error) {
			k := w.zipf.next()
			if w.r.IntN(100) < readPct {
				return w.get(ctx, k)
			}
			return w.put(ctx, k)
		}, nil
	case "readwhilewriting":
		if w.id == 0 {
			return func(ctx context.Context) (opKind, int, int, error) {
				return w.put(ctx, w.r.Int64N(w.cfg.Keys))
			}, nil
		}
		return func(ctx context.Context) (opKind, int, int, error) {
			return w.get(ctx, w.r.Int64N(w.cfg.Keys))
		}, nil
	case "readseq":
		return w.scan, nil
	case "multiget":
		return w.multiget, nil
	case "dirwalk":
		return w.walk, nil
	case "leases":
		s, wait, err := w.leaseSteps()
		w.wait = wait
		return s, err
	}
	return nil, fmt.Errorf("unknown workload %q", w.cfg.Workload)
}

func (w *worker) put(ctx context.Context, i int64) (opKind, int, int, error) {
	w.key = appendKey(w.key[:0], i, w.cfg.KeySize)
	fillValue(w.value, w.r)
	return opWrite, 1, 0, w.d.Put(ctx, w.key, w.value)
}

func (w *worker) get(ctx context.Context, i int64) (opKind, int, int, error) {
	w.key = appendKey(w.key[:0], i, w.cfg.KeySize)
	_, found, err := w.d.Get(ctx, w.key, w.cfg.Stale)
	if found {
		return opRead, 1, 1, err
	}
	return opRead, 1, 0, err
}

func (w *worker) multiget(ctx context.Context) (opKind, int, int, error) {
	for i := range w.keys {
		w.keys[i] = appendKey(w.keys[i][:0], w.r.Int64N(w.cfg.Keys), w.cfg.KeySize)
	}
	found, err := w.d.GetMany(ctx, w.keys, w.cfg.Stale)
	return opMultiGet, len(w.keys), found, err
}

// scan reads batch-size entries in key order from a random key of the key
// space; the whole page is one request, as db_bench's readseq reads one
// iterator step per entry but we cross the network once per page.
func (w *worker) scan(ctx context.Context) (opKind, int, int, error) {
	w.key = appendKey(w.key[:0], w.r.Int64N(w.cfg.Keys), w.cfg.KeySize)
	n, err := w.d.Scan(ctx, w.key, w.cfg.BatchSize)
	return opScan, n, n, err
}

// walk resolves one random path from the root to a leaf directory, one
// dependent lookup per level, and checks each answer against the tree's
// numbering: a missing or wrong directory is an error, not a slow walk.
func (w *worker) walk(ctx context.Context) (opKind, int, int, error) {
	parent := uint64(0)
	fanout := uint64(w.cfg.DirFanout)
	for level := range w.cfg.DirDepth {
		c := w.r.IntN(w.cfg.DirFanout)
		w.key = dirKey(w.key[:0], parent, c)
		v, found, err := w.d.Get(ctx, w.key, w.cfg.Stale)
		if err != nil {
			return opWalk, level + 1, level, err
		}
		if !found {
			return opWalk, level + 1, level, fmt.Errorf("dirwalk: directory %d of inode %d is missing", c, parent)
		}
		inode, err := dirInode(v)
		if err != nil {
			return opWalk, level + 1, level, err
		}
		if want := parent*fanout + 1 + uint64(c); inode != want {
			return opWalk, level + 1, level, fmt.Errorf("dirwalk: directory %d of inode %d has inode %d, want %d", c, parent, inode, want)
		}
		parent = inode
	}
	return opWalk, w.cfg.DirDepth, w.cfg.DirDepth, nil
}
