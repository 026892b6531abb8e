package main

import (
	"fmt"
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
// docs/replication.md, "CPU per write".
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
