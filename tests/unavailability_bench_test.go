package tests

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shaledb/shale/client"
)

// BenchmarkUnavailability measures, for faults on a range's leader, how
// long writes to that range stay unavailable, for Shale and for etcd
// under the same fault (issue 17, "Gray failures"):
//
//	make bench-unavailability
//	go test -run '^$' -bench Unavailability -benchtime 1x -timeout 30m ./tests/
//
// The window of one fault is the time from the fault to the first
// successful write invoked after it. A prober starts a new write every
// probeEvery, each with its own deadline (probeTimeout), so a write stuck
// on the faulty leader does not hide one that a new leader would take.
// Both systems run with the same Raft timing: a 100 ms heartbeat and an
// election timeout of 1 s, randomized up to 2 s (Shale's defaults, etcd's
// defaults).
//
// Faults, each repeated SHALE_UNAVAIL_ROUNDS times (default 5);
// SHALE_UNAVAIL_FAULTS narrows them (a comma-separated list):
//
//	kill-leader       SIGKILL the leader; restarted once writes flow again
//	pause-leader      SIGSTOP the leader (a long GC, a stalled VM); resumed
//	                  once writes flow again, or after probeTimeout
//	partition-leader  drop every packet to and from the leader's address
//	                  (iptables; skipped without it); healed then
//	stall-disk-leader every fsync and fdatasync of the leader's process
//	                  hangs for stallFor (strace's syscall delay
//	                  injection, the same for both systems; skipped
//	                  without strace); healed then
//
// SHALE_UNAVAIL_LOGS names a directory that receives each system's
// member logs after each fault (fault-system-member.log), and the bench
// logs each fault's wall-clock time, to break a window into its parts
// (docs/benchmarks.md, "Unavailability under leader faults").
//
// SHALE_UNAVAIL_ETCD is a comma-separated list of etcd binaries (default:
// etcd on the PATH; `make bench-unavailability` adds the etcd 3.7 that
// `make bench-cluster` builds, when present). It is a benchmark: it
// asserts nothing about the windows, only that every fault healed.
func BenchmarkUnavailability(b *testing.B) {
	rounds := envInt("SHALE_UNAVAIL_ROUNDS", 5)
	faults := []string{"kill-leader", "pause-leader", "partition-leader", "stall-disk-leader"}
	if v := os.Getenv("SHALE_UNAVAIL_FAULTS"); v != "" {
		faults = strings.Split(v, ",")
	}
	for _, f := range faults {
		switch f {
		case "kill-leader", "pause-leader":
		case "partition-leader":
			if _, err := exec.LookPath("iptables"); err != nil {
				b.Skip("partition-leader needs iptables")
			}
		case "stall-disk-leader":
			if _, err := exec.LookPath("strace"); err != nil {
				b.Skip("stall-disk-leader needs strace")
			}
		default:
			b.Fatalf("SHALE_UNAVAIL_FAULTS: unknown fault %q", f)
		}
	}
	type row struct {
		fault, system string
		windows       []time.Duration
	}
	var rows []row
	for _, f := range faults {
		sys := newShaleUnderFault(b)
		rows = append(rows, row{f, "shale", measureFault(b, sys, f, rounds)})
		sys.close()
		keepLogs(b, f, sys)
		for _, bin := range etcdBinaries() {
			esys := newEtcdUnderFault(b, bin)
			rows = append(rows, row{f, esys.name(), measureFault(b, esys, f, rounds)})
			esys.close()
			keepLogs(b, f, esys)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n| fault | system | rounds | p50 window | max window |\n|---|---|---:|---:|---:|\n")
	for _, r := range rows {
		p50, mx := windowStats(r.windows)
		fmt.Fprintf(&out, "| %s | %s | %d | %v | %v |\n", r.fault, r.system, len(r.windows), p50, mx)
	}
	b.Log(out.String())
	fmt.Print(out.String())
}

const (
	probeEvery   = 20 * time.Millisecond
	probeTimeout = 10 * time.Second
	// settle is how long writes must flow before the next fault.
	settle = 2 * time.Second
	// stallFor is how long each fsync of a disk-stalled leader hangs:
	// past the whole measurement, so only leaving the leader helps.
	stallFor = 30 * time.Second
)

// systemUnderFault is a 3-member cluster whose leader can be faulted.
type systemUnderFault interface {
	name() string
	// put writes one key; its context bounds the attempt.
	put(ctx context.Context, key, value string) error
	// leader returns the member that leads the written key's range.
	leader(ctx context.Context) (int, error)
	signal(member int, sig syscall.Signal) error
	restart(member int) error
	// pid and ip are the member's process and address.
	pid(member int) int
	ip(member int) string
	// logs are the members' log files.
	logs() []string
	close()
}

// keepLogs copies sys's member logs into SHALE_UNAVAIL_LOGS, if set.
func keepLogs(b *testing.B, fault string, sys systemUnderFault) {
	dir := os.Getenv("SHALE_UNAVAIL_LOGS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i, p := range sys.logs() {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("%s-%s-%d.log", fault, strings.ReplaceAll(sys.name(), " ", ""), i+1)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// measureFault runs rounds faults of kind fault against sys and returns
// each one's window.
func measureFault(b *testing.B, sys systemUnderFault, fault string, rounds int) []time.Duration {
	b.Helper()
	var windows []time.Duration
	for i := 0; i < rounds; i++ {
		waitWritesFlow(b, sys)
		p := startProber(sys, fmt.Sprintf("%s-%d", fault, i))
		// Let the prober reach its steady state first; the leader is
		// looked up just before the fault.
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lead, err := sys.leader(ctx)
		cancel()
		if err != nil {
			b.Fatalf("%s: finding the leader: %v", sys.name(), err)
		}
		var heal func() error
		at := time.Now()
		switch fault {
		case "kill-leader":
			err = sys.signal(lead, syscall.SIGKILL)
		case "pause-leader":
			err = sys.signal(lead, syscall.SIGSTOP)
		case "partition-leader":
			h := partition(b, sys.ip(lead))
			heal = func() error { h(); return nil }
			// Running iptables takes a while on a busy machine: the
			// fault starts once its rules are in.
			at = time.Now()
		case "stall-disk-leader":
			// The stall starts once strace has attached.
			heal, at, err = stallDisk(sys.pid(lead))
		}
		if err != nil {
			b.Fatalf("%s: %s: %v", sys.name(), fault, err)
		}
		w, ok := p.firstSuccessAfter(at, probeTimeout+time.Second)
		p.stop()
		p.trace(fmt.Sprintf("%s-%s-%d", fault, sys.name(), i), at, w)
		switch fault {
		case "kill-leader":
			err = sys.restart(lead)
		case "pause-leader":
			err = sys.signal(lead, syscall.SIGCONT)
		default:
			err = heal()
		}
		if err != nil {
			b.Fatalf("%s: healing %s: %v", sys.name(), fault, err)
		}
		if !ok {
			w = probeTimeout + time.Second // no write for the whole bound
		}
		line := fmt.Sprintf("%s %s round %d: leader %d, fault at %s, window %v", sys.name(), fault, i, lead,
			at.UTC().Format("15:04:05.000"), w.Round(time.Millisecond))
		b.Log(line)
		if os.Getenv("SHALE_UNAVAIL_LOGS") != "" {
			fmt.Println(line)
		}
		windows = append(windows, w)
	}
	return windows
}

// stallDisk makes every fsync and fdatasync of process pid (all its
// threads) hang for stallFor, with strace's syscall delay injection,
// until the returned function stops strace. It returns when strace
// reported attaching to the process (its threads follow within
// milliseconds): the stall's start.
func stallDisk(pid int) (func() error, time.Time, error) {
	cmd := exec.Command("strace", "-f", "-o", "/dev/null", "-p", strconv.Itoa(pid),
		"-e", "trace=fsync,fdatasync",
		"-e", fmt.Sprintf("inject=fsync,fdatasync:delay_enter=%d", stallFor.Microseconds()))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, time.Time{}, err
	}
	if err := cmd.Start(); err != nil {
		return nil, time.Time{}, err
	}
	// strace writes "Process N attached" per thread to stderr.
	attached := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "attached") {
				select {
				case attached <- time.Now():
				default:
				}
			}
		}
	}()
	heal := func() error {
		// strace detaches on SIGTERM: the delayed calls go on.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		_ = cmd.Wait() // "signal: terminated"
		return nil
	}
	select {
	case at := <-attached:
		return heal, at, nil
	case <-time.After(10 * time.Second):
		_ = heal()
		return nil, time.Time{}, fmt.Errorf("strace -p %d did not attach within 10s", pid)
	}
}

// waitWritesFlow waits until a write succeeds, then lets the cluster
// settle (a restarted member catches up).
func waitWritesFlow(b *testing.B, sys systemUnderFault) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := sys.put(ctx, "unavail/settle", "x")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: writes do not flow: %v", sys.name(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(settle)
}

// prober starts a write every probeEvery and records when each one that
// succeeded was started and finished.
type prober struct {
	mu     sync.Mutex
	ok     [][2]time.Time // invoke, complete
	all    []probe        // every write that ended
	stopc  chan struct{}
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func startProber(sys systemUnderFault, prefix string) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{stopc: make(chan struct{}), cancel: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for n := 0; n < int(3*probeTimeout/probeEvery); n++ {
			select {
			case <-p.stopc:
				return
			case <-t.C:
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
				defer pcancel()
				start := time.Now()
				err := sys.put(pctx, fmt.Sprintf("unavail/%s/%d", prefix, n), "v")
				end := time.Now()
				p.mu.Lock()
				if err == nil {
					p.ok = append(p.ok, [2]time.Time{start, end})
				}
				p.all = append(p.all, probe{start, end, err})
				p.mu.Unlock()
			}()
		}
	}()
	return p
}

type probe struct {
	start, end time.Time
	err        error
}

// trace writes the writes started from at-100ms to at+w, one a line with
// their start and end relative to at (the client's part of a window).
func (p *prober) trace(name string, at time.Time, w time.Duration) {
	dir := os.Getenv("SHALE_UNAVAIL_LOGS")
	if dir == "" {
		return
	}
	p.mu.Lock()
	ps := append([]probe(nil), p.all...)
	p.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].start.Before(ps[j].start) })
	var sb strings.Builder
	for _, pr := range ps {
		if pr.start.Before(at.Add(-100*time.Millisecond)) || pr.start.After(at.Add(w)) {
			continue
		}
		msg := "ok"
		if pr.err != nil {
			msg = pr.err.Error()
		}
		fmt.Fprintf(&sb, "%+.3f %+.3f %s\n", pr.start.Sub(at).Seconds(), pr.end.Sub(at).Seconds(), msg)
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, " ", "")+".probes"), []byte(sb.String()), 0o644)
}

// firstSuccessAfter waits up to bound for a write started after at to
// succeed, and returns how long after at the first one finished.
func (p *prober) firstSuccessAfter(at time.Time, bound time.Duration) (time.Duration, bool) {
	deadline := at.Add(bound)
	for {
		p.mu.Lock()
		var first time.Time
		for _, o := range p.ok {
			if !o[0].Before(at) && (first.IsZero() || o[1].Before(first)) {
				first = o[1]
			}
		}
		p.mu.Unlock()
		// A later-started write cannot finish before one seen already,
		// unless it is still in flight: give those a moment.
		if !first.IsZero() && time.Since(first) > 100*time.Millisecond {
			return first.Sub(at), true
		}
		if time.Now().After(deadline) {
			if !first.IsZero() {
				return first.Sub(at), true
			}
			return 0, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *prober) stop() {
	close(p.stopc)
	p.cancel()
	p.wg.Wait()
}

func windowStats(ws []time.Duration) (p50, max time.Duration) {
	if len(ws) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ws...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond)
}

// ---------------------------------------------------------------- shale

type shaleUnderFault struct {
	c  *testCluster
	cl *client.Client
}

func newShaleUnderFault(b *testing.B) *shaleUnderFault {
	// Production Raft timing (a later flag wins over the harness's).
	c := newCluster(b, 3, "--raft-tick", "100ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.endpoints(), &client.Options{RequestTimeout: probeTimeout})
	if err != nil {
		b.Fatal(err)
	}
	return &shaleUnderFault{c: c, cl: cl}
}

func (s *shaleUnderFault) name() string { return "shale" }

func (s *shaleUnderFault) put(ctx context.Context, key, value string) error {
	return s.cl.Put(ctx, []byte(key), []byte(value))
}

// leader is the leader of range 2, the one user range (the harness turns
// automatic splits off): of the nodes that say they lead it, the one of
// the highest term (one deposed a moment ago may not know yet).
func (s *shaleUnderFault) leader(ctx context.Context) (int, error) {
	for ctx.Err() == nil {
		var lead, term uint64
		for _, cn := range s.c.all() {
			if !cn.running() {
				continue
			}
			if rs, err := s.c.rangeState(cn.id, 2); err == nil && rs.GetRaft().GetState() == "leader" && rs.GetRaft().GetTerm() > term {
				lead, term = cn.id, rs.GetRaft().GetTerm()
			}
		}
		if lead != 0 {
			return int(lead), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, ctx.Err()
}

func (s *shaleUnderFault) signal(member int, sig syscall.Signal) error {
	cn := s.c.node(uint64(member))
	switch sig {
	case syscall.SIGSTOP:
		return cn.proc.Pause()
	case syscall.SIGCONT:
		return cn.proc.Resume()
	default:
		cn.kill()
		return nil
	}
}

func (s *shaleUnderFault) pid(member int) int { return s.c.node(uint64(member)).proc.Pid() }

func (s *shaleUnderFault) ip(member int) string { return s.c.node(uint64(member)).ip }

func (s *shaleUnderFault) logs() []string {
	var out []string
	for _, cn := range s.c.all() {
		out = append(out, filepath.Join(s.c.dir, fmt.Sprintf("node%d.log", cn.id)))
	}
	return out
}

func (s *shaleUnderFault) restart(member int) error {
	s.c.start(uint64(member))
	return nil
}

func (s *shaleUnderFault) close() {
	s.cl.Close()
	for _, cn := range s.c.all() {
		cn.kill()
	}
}

// ---------------------------------------------------------------- etcd

// etcdBinaries are the etcd servers to compare with.
func etcdBinaries() []string {
	if v := os.Getenv("SHALE_UNAVAIL_ETCD"); v != "" {
		return strings.Split(v, ",")
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return []string{p}
	}
	return nil
}

type etcdUnderFault struct {
	b       testing.TB
	bin     string
	version string
	dir     string
	members []*etcdMember
	cl      *clientv3.Client
}

type etcdMember struct {
	name, clientURL, peerURL string
	args                     []string
	cmd                      *exec.Cmd
	done                     chan struct{}
	id                       uint64
}

func newEtcdUnderFault(b *testing.B, bin string) *etcdUnderFault {
	b.Helper()
	e := &etcdUnderFault{b: b, bin: bin, dir: b.TempDir()}
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "etcd Version: "); ok {
				e.version = strings.TrimSpace(v)
			}
		}
	}
	var initial []string
	for i := 1; i <= 3; i++ {
		ip := fmt.Sprintf("%s.%d", testNet(), ipBase+50+i)
		m := &etcdMember{name: fmt.Sprintf("e%d", i),
			// etcd binds held ports itself (see clusterharness.Port).
			clientURL: "http://" + reserveAddr(b, ip),
			peerURL:   "http://" + reserveAddr(b, ip)}
		e.members = append(e.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	for _, m := range e.members {
		m.args = []string{"--name", m.name, "--data-dir", filepath.Join(e.dir, m.name),
			"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
			"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "shale-unavail",
			"--heartbeat-interval", "100", "--election-timeout", "1000"}
		if err := e.startMember(m); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(e.close)
	var eps []string
	for _, m := range e.members {
		eps = append(eps, strings.TrimPrefix(m.clientURL, "http://"))
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	e.cl = cl
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range e.members {
		for {
			st, err := cl.Status(ctx, strings.TrimPrefix(m.clientURL, "http://"))
			if err == nil {
				m.id = st.Header.GetMemberId()
				break
			}
			if ctx.Err() != nil {
				b.Fatalf("etcd member %s: %v", m.name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return e
}

func (e *etcdUnderFault) startMember(m *etcdMember) error {
	logf, err := os.OpenFile(filepath.Join(e.dir, m.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(e.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	m.cmd, m.done = cmd, done
	return nil
}

func (e *etcdUnderFault) name() string {
	if e.version != "" {
		return "etcd " + e.version
	}
	return "etcd"
}

func (e *etcdUnderFault) put(ctx context.Context, key, value string) error {
	_, err := e.cl.Put(ctx, key, value)
	return err
}

func (e *etcdUnderFault) leader(ctx context.Context) (int, error) {
	for ctx.Err() == nil {
		for _, m := range e.members {
			sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			st, err := e.cl.Status(sctx, strings.TrimPrefix(m.clientURL, "http://"))
			cancel()
			if err != nil || st.Leader == 0 {
				continue
			}
			for i, mm := range e.members {
				if mm.id == st.Leader {
					return i + 1, nil
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, ctx.Err()
}

func (e *etcdUnderFault) signal(member int, sig syscall.Signal) error {
	m := e.members[member-1]
	if err := m.cmd.Process.Signal(sig); err != nil {
		return err
	}
	if sig == syscall.SIGKILL {
		<-m.done
	}
	return nil
}

func (e *etcdUnderFault) pid(member int) int { return e.members[member-1].cmd.Process.Pid }

func (e *etcdUnderFault) ip(member int) string {
	u, err := url.Parse(e.members[member-1].peerURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func (e *etcdUnderFault) logs() []string {
	var out []string
	for _, m := range e.members {
		out = append(out, filepath.Join(e.dir, m.name+".log"))
	}
	return out
}

func (e *etcdUnderFault) restart(member int) error {
	return e.startMember(e.members[member-1])
}

func (e *etcdUnderFault) close() {
	if e.cl != nil {
		e.cl.Close()
		e.cl = nil
	}
	for _, m := range e.members {
		if m.cmd != nil && m.cmd.Process != nil {
			m.cmd.Process.Signal(syscall.SIGCONT)
			m.cmd.Process.Kill()
			<-m.done
		}
	}
}
