package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaledb/shale/client"
)

// BenchmarkWatch measures watch side by side with etcd (issue 21): on a
// 3-node Shale cluster and a 3-member etcd (when an etcd binary is found:
// $SHALE_ETCD_BIN, else etcd on the PATH), one after the other on the same
// machine,
//
//   - lag: SHALE_WATCH_WATCHERS (100) watchers on one prefix while writers
//     put SHALE_WATCH_RATE (5,000) writes a second to 1,000 keys under it
//     for SHALE_WATCH_SECONDS (10); an event's lag is from its write's
//     acknowledgement to its arrival at a watcher (0 when it arrives
//     first), over every event at every watcher: p50, p99, max, and the
//     write rate reached;
//
//   - idle: SHALE_WATCH_IDLE (10,000) watchers on one prefix, all served
//     by one node (Shale: the range's leader; etcd: the member the
//     watchers' client talks to), and what that node's resident memory
//     (and, for Shale, Go heap) grew by, per watcher.
//
//     make bench-watch
//
// docs/benchmarks.md, "Watch", records the results. Every load loop is
// bounded by its count and its time.
func BenchmarkWatch(b *testing.B) {
	watchers := envInt("SHALE_WATCH_WATCHERS", 100)
	rate := envInt("SHALE_WATCH_RATE", 5000)
	seconds := envInt("SHALE_WATCH_SECONDS", 10)
	idle := envInt("SHALE_WATCH_IDLE", 10000)
	for i := 0; i < b.N; i++ {
		b.Run("shale", func(b *testing.B) {
			s := newShaleWatchSystem(b)
			watchLagRun(b, s, watchers, rate, time.Duration(seconds)*time.Second)
			watchIdleRun(b, s, idle)
		})
		b.Run("etcd", func(b *testing.B) {
			s := newEtcdWatchSystem(b)
			watchLagRun(b, s, watchers, rate, time.Duration(seconds)*time.Second)
			watchIdleRun(b, s, idle)
		})
	}
}

// watchSystem is what the benchmark needs of a store.
type watchSystem interface {
	name() string
	// put writes key; nil once acknowledged.
	put(ctx context.Context, key, value string) error
	// watch calls fn with each event's key and value under prefix, and
	// ready once the watch is established, until ctx ends.
	watch(ctx context.Context, prefix string, ready func(), fn func(key, value string))
	// memory is the serving node's resident bytes and, if known, Go heap.
	memory(b *testing.B) (rss, heap float64)
	// reserve makes room for n watches at once.
	reserve(b *testing.B, n int)
}

func watchLagRun(b *testing.B, s watchSystem, watchers, rate int, d time.Duration) {
	const prefix = "wl/"
	total := rate * int(d/time.Second)
	acked := make([]atomic.Int64, total)
	recv := make([][]int64, watchers)
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()
	var ready sync.WaitGroup
	var wg sync.WaitGroup
	wctx, stopWatchers := context.WithCancel(ctx)
	for w := range watchers {
		recv[w] = make([]int64, total)
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := sync.Once{}
			s.watch(wctx, prefix, func() { once.Do(ready.Done) }, func(_, value string) {
				if id, err := strconv.Atoi(value); err == nil && id < total {
					atomic.StoreInt64(&recv[w][id], time.Now().UnixNano())
				}
			})
		}()
	}
	ready.Wait()
	// Open loop: a pacer hands out ids at rate; 256 writers take them.
	ids := make(chan int, 1024)
	go func() {
		defer close(ids)
		start := time.Now()
		for id := range total {
			if wait := time.Until(start.Add(time.Duration(id) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
			select {
			case ids <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	var writers sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for range 256 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for id := range ids {
				octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
				err := s.put(octx, fmt.Sprintf("%s%04d", prefix, id%1000), strconv.Itoa(id))
				ocancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				acked[id].Store(time.Now().UnixNano())
			}
		}()
	}
	writers.Wait()
	took := time.Since(start)
	// Every watcher gets every acknowledged write, within a minute.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		missing := 0
		for w := range watchers {
			for id := range total {
				if acked[id].Load() != 0 && atomic.LoadInt64(&recv[w][id]) == 0 {
					missing++
				}
			}
		}
		if missing == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopWatchers()
	wg.Wait()
	var lags []time.Duration
	missing := 0
	for w := range watchers {
		for id := range total {
			a := acked[id].Load()
			if a == 0 {
				continue
			}
			r := atomic.LoadInt64(&recv[w][id])
			if r == 0 {
				missing++
				continue
			}
			lags = append(lags, time.Duration(max(0, r-a)))
		}
	}
	if len(lags) == 0 {
		b.Fatalf("%s: no event arrived (%d writes failed)", s.name(), failed.Load())
	}
	slices.Sort(lags)
	pct := func(p int) time.Duration { return lags[min(len(lags)-1, len(lags)*p/100)] }
	b.Logf("%s lag: %d watchers, %d writes in %v (%.0f/s, %d failed): event lag p50 %v, p99 %v, max %v over %d events; %d never arrived",
		s.name(), watchers, total-int(failed.Load()), took.Round(time.Millisecond), float64(total-int(failed.Load()))/took.Seconds(),
		failed.Load(), pct(50), pct(99), lags[len(lags)-1], len(lags), missing)
	b.ReportMetric(float64(pct(99).Microseconds())/1000, "p99-lag-ms")
}

func watchIdleRun(b *testing.B, s watchSystem, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	time.Sleep(2 * time.Second) // settle after the lag run
	s.reserve(b, n)
	rss0, heap0 := s.memory(b)
	var ready, wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	for range n {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := sync.Once{}
			s.watch(wctx, "idle/", func() { once.Do(ready.Done) }, func(string, string) {})
		}()
	}
	ready.Wait()
	time.Sleep(5 * time.Second) // idle
	rss1, heap1 := s.memory(b)
	stop()
	wg.Wait()
	b.Logf("%s idle: %d watchers: serving node RSS %.0f -> %.0f MiB (%.1f KiB per watcher), Go heap %.0f -> %.0f MiB (%.1f KiB per watcher)",
		s.name(), n, rss0/(1<<20), rss1/(1<<20), (rss1-rss0)/float64(n)/1024, heap0/(1<<20), heap1/(1<<20), (heap1-heap0)/float64(n)/1024)
	b.ReportMetric((rss1-rss0)/float64(n)/1024, "rss-KiB/watcher")
}

// shaleWatchSystem is a 3-node cluster and a few clients (watchers share
// them round-robin, as an application's would).
type shaleWatchSystem struct {
	c       *testCluster
	clients []*client.Client
	next    atomic.Int64
}

func newShaleWatchSystem(b *testing.B) *shaleWatchSystem {
	c := newCluster(b, 3)
	s := &shaleWatchSystem{c: c}
	for range 8 {
		s.clients = append(s.clients, c.client())
	}
	return s
}

func (s *shaleWatchSystem) name() string { return "shale" }

func (s *shaleWatchSystem) cl() *client.Client {
	return s.clients[int(s.next.Add(1))%len(s.clients)]
}

// reserve does nothing: a client spreads its watches over connections
// itself (client/watch_conns.go).
func (s *shaleWatchSystem) reserve(*testing.B, int) {}

func (s *shaleWatchSystem) put(ctx context.Context, key, value string) error {
	return s.cl().Put(ctx, []byte(key), []byte(value))
}

func (s *shaleWatchSystem) watch(ctx context.Context, prefix string, ready func(), fn func(string, string)) {
	ch, err := s.cl().Watch(ctx, []byte(prefix), client.PrefixEnd([]byte(prefix)), nil)
	if err != nil {
		ready()
		return
	}
	for resp := range ch {
		if !resp.Progress.IsZero() {
			ready()
		}
		for _, e := range resp.Events {
			fn(string(e.Key), string(e.Value))
		}
		if resp.Err != nil {
			ready()
		}
	}
}

func (s *shaleWatchSystem) memory(b *testing.B) (float64, float64) {
	leader, _ := s.c.leader(userRange, 10*time.Second)
	rss, heap := s.c.memory()
	return rss[leader], heap[leader]
}

// etcdWatchSystem is a 3-member etcd on 127.0.0.1 and a few clients, all
// talking to the first member (so idle watchers load one member).
type etcdWatchSystem struct {
	procs   []*exec.Cmd
	clients []*clientv3.Client
	next    atomic.Int64
}

func newEtcdWatchSystem(b *testing.B) *etcdWatchSystem {
	bin := os.Getenv("SHALE_ETCD_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("etcd"); err != nil {
			b.Skip("no etcd binary (set SHALE_ETCD_BIN, or scripts/deps --bench)")
		}
	} else if !filepath.IsAbs(bin) {
		// go test runs in tests/, and the docs' commands give the path from
		// the repository root (SHALE_ETCD_BIN=build/etcd37/etcd).
		bin = filepath.Join("..", bin)
	}
	dir := b.TempDir()
	// etcd binds held ports itself (see clusterharness.Port).
	port := func() string { return reserveAddr(b, "127.0.0.1") }
	var clientURLs, peerURLs, initial []string
	for i := range 3 {
		clientURLs = append(clientURLs, "http://"+port())
		peerURLs = append(peerURLs, "http://"+port())
		initial = append(initial, fmt.Sprintf("e%d=%s", i, peerURLs[i]))
	}
	s := &etcdWatchSystem{}
	for i := range 3 {
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("etcd%d.log", i)))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "--name", fmt.Sprintf("e%d", i), "--data-dir", filepath.Join(dir, fmt.Sprint("e", i)),
			"--listen-client-urls", clientURLs[i], "--advertise-client-urls", clientURLs[i],
			"--listen-peer-urls", peerURLs[i], "--initial-advertise-peer-urls", peerURLs[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		s.procs = append(s.procs, cmd)
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	}
	for range 8 {
		cl, err := clientv3.New(clientv3.Config{Endpoints: clientURLs[:1], DialTimeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		s.clients = append(s.clients, cl)
	}
	// Up once a write goes through.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.clients[0].Put(ctx, "ready", "1")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("etcd did not come up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return s
}

func (s *etcdWatchSystem) name() string { return "etcd" }

func (s *etcdWatchSystem) cl() *clientv3.Client {
	return s.clients[int(s.next.Add(1))%len(s.clients)]
}

// reserve does nothing: an etcd client carries all its watches on one
// stream.
func (s *etcdWatchSystem) reserve(*testing.B, int) {}

func (s *etcdWatchSystem) put(ctx context.Context, key, value string) error {
	_, err := s.cl().Put(ctx, key, value)
	return err
}

func (s *etcdWatchSystem) watch(ctx context.Context, prefix string, ready func(), fn func(string, string)) {
	// WithCreatedNotify: the first response says the watch is set up.
	ch := s.cl().Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for resp := range ch {
		if resp.Created || resp.Err() != nil {
			ready()
		}
		for _, e := range resp.Events {
			fn(string(e.Kv.Key), string(e.Kv.Value))
		}
	}
	ready()
}

func (s *etcdWatchSystem) memory(b *testing.B) (float64, float64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.procs[0].Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024, 0
		}
	}
	return 0, 0
}
