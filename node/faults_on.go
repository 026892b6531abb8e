//go:build faults

package node

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// This file is compiled only into binaries built with the `faults` tag
// (`make chaos` builds bin/shale-faults so). Such a node opens its engine
// over the engine's fault-injection file layer and serves
//
//	PUT    /debug/faults/disk?ops=sync,append&delay=100ms&jitter=50ms
//	GET    /debug/faults/disk
//	DELETE /debug/faults/disk
//	PUT    /debug/faults/clock?offset=2s
//	GET    /debug/faults/clock
//	DELETE /debug/faults/clock
//	PUT    /debug/faults/txn?skip_read_validation=true
//	GET    /debug/faults/txn
//	DELETE /debug/faults/txn
//	PUT    /debug/faults/export-drop
//	DELETE /debug/faults/export-drop
//	PUT    /debug/faults/lease-early
//	DELETE /debug/faults/lease-early
//	PUT    /debug/faults/protect-ignore
//	DELETE /debug/faults/protect-ignore
//	PUT    /debug/faults/watch-drop     (faults_watch_on.go)
//	DELETE /debug/faults/watch-drop
//	PUT    /debug/faults/deadlock-ignore
//	DELETE /debug/faults/deadlock-ignore
//
// on its HTTP address: every engine file operation of the named kinds
// (default: sync) first sleeps delay plus a random extra up to jitter,
// until cleared; and the clock: the node's physical clock reads offset
// (either sign) away from the machine's until cleared (the fault suite's
// clock-skew nemesis; --testing-clock-offset sets the same at start); and
// a planted bug: one-range transactions commit without validating their
// reads (rangesm/faults_on.go), which the transaction checkers of the
// fault suite must catch (set it on every node, or replicas diverge); and
// a planted bug for the fault suite's backup checker: while export-drop is
// set, every backup file this node exports leaves out its first key; and
// a planted bug for the fault suite's lease checker: while lease-early is
// set, a keep-alive this node serves as meta's leader is acknowledged
// without renewing the lease, so keys go before their TTL; and a planted
// bug for the fault suite's protection check: while protect-ignore is
// set, this node's GC passes ignore protected timestamps; and a planted
// bug for the deadlock detector: while deadlock-ignore is set, a waiter
// this node serves that finds itself in a cycle of waits does not give
// up (txn_wait.go), so the cycle lasts until the waits' bound. A
// slow disk for the fault tests (tests/jepsen); never for
// a production binary, since anyone reaching the HTTP address could slow
// the node down.

// faultInjectionBuilt: this binary carries the fault endpoints.
const faultInjectionBuilt = true

// faultState remembers the delays set, for GET. Its mutex is held while a
// delay is set, so the engine's settings and the record agree.
type faultState struct {
	mu     sync.Mutex
	delays map[string]diskDelay // by kind of operation
	// dropExport is the planted export bug (dropExportEntry).
	dropExport atomic.Bool
	// leaseEarly is the planted lease bug (leaseKeepAliveIgnored).
	leaseEarly atomic.Bool
	// protectIgnore is the planted protection bug (gcIgnoresProtections).
	protectIgnore atomic.Bool
	// deadlockIgnore is the planted deadlock bug (deadlocksIgnored).
	deadlockIgnore atomic.Bool
}

type diskDelay struct{ delay, jitter time.Duration }

func (n *Node) registerFaultHandlers(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/faults/disk", n.serveDiskDelays)
	mux.HandleFunc("PUT /debug/faults/disk", n.setDiskDelay)
	mux.HandleFunc("DELETE /debug/faults/disk", n.clearDiskDelays)
	mux.HandleFunc("GET /debug/faults/clock", n.setClockOffset)
	mux.HandleFunc("PUT /debug/faults/clock", n.setClockOffset)
	mux.HandleFunc("DELETE /debug/faults/clock", n.setClockOffset)
	mux.HandleFunc("GET /debug/faults/txn", n.setTxnFault)
	mux.HandleFunc("PUT /debug/faults/txn", n.setTxnFault)
	mux.HandleFunc("DELETE /debug/faults/txn", n.setTxnFault)
	mux.HandleFunc("PUT /debug/faults/export-drop", n.setExportDrop)
	mux.HandleFunc("DELETE /debug/faults/export-drop", n.setExportDrop)
	mux.HandleFunc("PUT /debug/faults/lease-early", n.setLeaseEarly)
	mux.HandleFunc("DELETE /debug/faults/lease-early", n.setLeaseEarly)
	mux.HandleFunc("PUT /debug/faults/protect-ignore", n.setProtectIgnore)
	mux.HandleFunc("DELETE /debug/faults/protect-ignore", n.setProtectIgnore)
	mux.HandleFunc("PUT /debug/faults/watch-drop", n.setWatchDrop) // faults_watch_on.go
	mux.HandleFunc("DELETE /debug/faults/watch-drop", n.setWatchDrop)
	mux.HandleFunc("PUT /debug/faults/deadlock-ignore", n.setDeadlockIgnore)
	mux.HandleFunc("DELETE /debug/faults/deadlock-ignore", n.setDeadlockIgnore)
}

// setDeadlockIgnore plants (PUT) or removes (DELETE) the deadlock bug.
func (n *Node) setDeadlockIgnore(w http.ResponseWriter, r *http.Request) {
	on := r.Method == http.MethodPut
	n.faults.deadlockIgnore.Store(on)
	n.log.Warn("fault injection: cycles of waiting transactions are not broken", "on", on)
	fmt.Fprintf(w, "deadlock-ignore %v\n", on)
}

// deadlocksIgnored says whether a waiter in a cycle keeps waiting instead
// of giving up (the planted bug is set).
func (n *Node) deadlocksIgnored() bool { return n.faults.deadlockIgnore.Load() }

// setLeaseEarly plants (PUT) or removes (DELETE) the lease bug.
func (n *Node) setLeaseEarly(w http.ResponseWriter, r *http.Request) {
	on := r.Method == http.MethodPut
	n.faults.leaseEarly.Store(on)
	n.log.Warn("fault injection: keep-alives are acknowledged without renewing leases", "on", on)
	fmt.Fprintf(w, "lease-early %v\n", on)
}

// setProtectIgnore plants (PUT) or removes (DELETE) the protection bug.
func (n *Node) setProtectIgnore(w http.ResponseWriter, r *http.Request) {
	on := r.Method == http.MethodPut
	n.faults.protectIgnore.Store(on)
	n.log.Warn("fault injection: GC ignores protected timestamps", "on", on)
	fmt.Fprintf(w, "protect-ignore %v\n", on)
}

// gcIgnoresProtections says whether GC passes ignore protected
// timestamps (the planted bug is set).
func (n *Node) gcIgnoresProtections() bool { return n.faults.protectIgnore.Load() }

// leaseKeepAliveIgnored says whether keep-alives are acknowledged without
// renewing (the planted bug is set).
func (n *Node) leaseKeepAliveIgnored() bool { return n.faults.leaseEarly.Load() }

// setTxnFault turns the planted transaction bug on (PUT
// ?skip_read_validation=true) or off (DELETE), or says which it is (GET).
func (n *Node) setTxnFault(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPut:
		on, err := strconv.ParseBool(r.URL.Query().Get("skip_read_validation"))
		if err != nil {
			http.Error(w, "skip_read_validation: "+err.Error(), http.StatusBadRequest)
			return
		}
		rangesm.SetSkipTxnReadValidation(on)
		n.log.Warn("fault injection: transaction read validation", "skipped", on)
	case http.MethodDelete:
		rangesm.SetSkipTxnReadValidation(false)
	}
	fmt.Fprintf(w, "skip_read_validation %v\n", rangesm.SkipTxnReadValidation())
}

// setExportDrop plants (PUT) or removes (DELETE) the export bug.
func (n *Node) setExportDrop(w http.ResponseWriter, r *http.Request) {
	on := r.Method == http.MethodPut
	n.faults.dropExport.Store(on)
	n.log.Warn("fault injection: backup exports drop their first key", "on", on)
	fmt.Fprintf(w, "export-drop %v\n", on)
}

// dropExportEntry says whether an export leaves out its entry number i
// (from 0): the first one, while the planted bug is set.
func (n *Node) dropExportEntry(i uint64) bool {
	return i == 0 && n.faults.dropExport.Load()
}

// setClockOffset shifts the node's physical clock (PUT ?offset=), puts it
// back (DELETE) or says how far it is shifted (GET).
func (n *Node) setClockOffset(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		fmt.Fprintf(w, "clock offset %v\n", time.Duration(n.physClock.offset.Load()))
		return
	}
	var off time.Duration
	if r.Method == http.MethodPut {
		v, err := time.ParseDuration(r.URL.Query().Get("offset"))
		if err != nil {
			http.Error(w, "offset: "+err.Error(), http.StatusBadRequest)
			return
		}
		off = v
	}
	n.physClock.offset.Store(int64(off))
	n.log.Warn("fault injection: the node's clock is shifted", "offset", off)
	fmt.Fprintf(w, "clock offset %v\n", off)
}

func (n *Node) setDiskDelay(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var ops storage.IOOps
	names := strings.Split(q.Get("ops"), ",")
	if q.Get("ops") == "" {
		names = []string{"sync"}
	}
	for _, name := range names {
		op, err := storage.ParseIOOp(strings.TrimSpace(name))
		if err != nil {
			http.Error(w, "ops: "+err.Error(), http.StatusBadRequest)
			return
		}
		ops |= op
	}
	var d diskDelay
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{{"delay", &d.delay}, {"jitter", &d.jitter}} {
		s := q.Get(p.name)
		if s == "" {
			continue
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", p.name, err), http.StatusBadRequest)
			return
		}
		*p.dst = v
	}
	if d.delay == 0 && d.jitter == 0 {
		http.Error(w, "delay: missing or zero (DELETE /debug/faults/disk clears the delays)", http.StatusBadRequest)
		return
	}
	n.faults.mu.Lock()
	defer n.faults.mu.Unlock()
	if err := n.db.SetIODelay(ops, d.delay, d.jitter); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if n.faults.delays == nil {
		n.faults.delays = map[string]diskDelay{}
	}
	for _, name := range strings.Split(ops.String(), "|") {
		n.faults.delays[name] = d
	}
	n.log.Warn("fault injection: engine file operations delayed", "ops", ops.String(), "delay", d.delay, "jitter", d.jitter)
	writeDiskDelays(w, n.faults.delays)
}

func (n *Node) clearDiskDelays(w http.ResponseWriter, _ *http.Request) {
	n.faults.mu.Lock()
	defer n.faults.mu.Unlock()
	if err := n.db.SetIODelay(storage.IOAll, 0, 0); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if len(n.faults.delays) > 0 {
		n.log.Warn("fault injection: engine file delays cleared")
	}
	n.faults.delays = nil
	writeDiskDelays(w, nil)
}

func (n *Node) serveDiskDelays(w http.ResponseWriter, _ *http.Request) {
	n.faults.mu.Lock()
	defer n.faults.mu.Unlock()
	writeDiskDelays(w, n.faults.delays)
}

// writeDiskDelays lists the delays in force, one kind per line
// ("sync 100ms +0-50ms"), or "none".
func writeDiskDelays(w http.ResponseWriter, delays map[string]diskDelay) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(delays) == 0 {
		fmt.Fprintln(w, "none")
		return
	}
	names := make([]string, 0, len(delays))
	for name := range delays {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "%s %v +0-%v\n", name, delays[name].delay, delays[name].jitter)
	}
}
