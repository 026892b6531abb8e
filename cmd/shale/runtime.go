package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// defaultGCPercent is the node's garbage collector target (--gc-percent).
//
// The node's Go heap is small (about 15 MiB live under a write load: the
// engine's memtables and block cache are C memory) and churns fast (every
// write allocates its request, its Raft entry and messages), so with Go's
// default of 100 it collected several times a second, and the collector
// took about 5% of a node's CPU in profiles of a write load. 200 halves
// the collections for a few more MiB of heap. It stays well below values
// like 400 or off because an incoming snapshot is staged in the Go heap
// (up to --max-snapshot-bytes): the heap may grow to (1 + 200/100) times
// what is live before a collection, and a larger factor on a large
// snapshot would cost memory a small machine does not have.
// See docs/replication.md, "CPU per write".
const defaultGCPercent = 200

// setGCPercent applies --gc-percent; 0 leaves the runtime's setting (the
// GOGC environment variable, or 100).
func setGCPercent(p int) error {
	switch {
	case p < 0:
		return fmt.Errorf("--gc-percent %d: need 0 (the runtime's GOGC) or a positive percentage", p)
	case p > 0:
		debug.SetGCPercent(p)
	}
	return nil
}

// extraProcs is how many Go scheduler Ps (--gomaxprocs) the node runs
// beyond the CPUs it may use.
//
// The node spends long stretches in cgo calls into the engine: the log
// writer's fsync (a millisecond or more) and the processing round's apply
// batches (tens of microseconds). A goroutine in a cgo call holds its P, so
// with one P per CPU, on a small machine both Ps were often held by the
// engine while gRPC requests and Raft messages waited, until the runtime's
// monitor took a P back (it polls every 20 µs while that happens, and each
// take-back wakes another thread). Two extra Ps let the rest of the node
// run while both are in the engine; the OS still runs only as many threads
// at once as there are CPUs. Side by side on two CPUs (docs/replication.md,
// "CPU per write"), GOMAXPROCS 4 instead of 2 wrote 36-39% more per second
// with less CPU per write.
const extraProcs = 2

// setGOMAXPROCS applies --gomaxprocs: a positive value is used as is; 0
// keeps the GOMAXPROCS environment variable if it is set, and otherwise
// adds extraProcs to the runtime's default (the CPUs available).
func setGOMAXPROCS(n int, getenv func(string) string) error {
	switch {
	case n < 0:
		return fmt.Errorf("--gomaxprocs %d: need 0 (automatic) or a positive count", n)
	case n > 0:
		runtime.GOMAXPROCS(n)
	case getenv("GOMAXPROCS") == "":
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + extraProcs)
	}
	return nil
}
