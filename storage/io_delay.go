package storage

/*
#include "shale/engine.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"time"
)

// IOOps is a set of kinds of file operation that SetIODelay can slow down.
type IOOps uint32

// The kinds of file operation, as the engine's SHALE_IO_* bits.
const (
	// IOAppend: appends to and flushes of any file.
	IOAppend IOOps = C.SHALE_IO_APPEND
	// IOSync: fsyncs of files (WAL, SSTs, MANIFEST) and of the database
	// directory, including the WAL syncs of Sync writes and of SyncWAL.
	IOSync IOOps = C.SHALE_IO_SYNC
	// IOCreate: creating a file.
	IOCreate IOOps = C.SHALE_IO_CREATE
	// IORead: reads, and opening a file to read it.
	IORead IOOps = C.SHALE_IO_READ
	// IORename: renames.
	IORename IOOps = C.SHALE_IO_RENAME
	// IOAll is every kind.
	IOAll = IOAppend | IOSync | IOCreate | IORead | IORename
)

// MaxIODelay is the longest delay plus jitter SetIODelay accepts.
const MaxIODelay = time.Duration(C.SHALE_MAX_IO_DELAY_MICROS) * time.Microsecond

var ioOpNames = []struct {
	op   IOOps
	name string
}{{IOAppend, "append"}, {IOSync, "sync"}, {IOCreate, "create"}, {IORead, "read"}, {IORename, "rename"}}

// String names the kinds in o, e.g. "sync|read".
func (o IOOps) String() string {
	var names []string
	for _, n := range ioOpNames {
		if o&n.op != 0 {
			names = append(names, n.name)
			o &^= n.op
		}
	}
	if o != 0 || len(names) == 0 {
		names = append(names, fmt.Sprintf("%#x", uint32(o)))
	}
	return strings.Join(names, "|")
}

// ParseIOOp parses one kind's name: append, sync, create, read or rename.
func ParseIOOp(name string) (IOOps, error) {
	for _, n := range ioOpNames {
		if n.name == name {
			return n.op, nil
		}
	}
	return 0, errorf(ErrInvalidArgument, "unknown I/O operation %q (want append, sync, create, read or rename)", name)
}

// SetIODelay is for tests only: it simulates a slow disk. From now on each
// file operation of a kind in ops first sleeps delay plus a uniformly
// random extra in [0, jitter]; a zero delay and jitter remove the delay of
// those kinds, and kinds not in ops keep theirs. It may be called at any
// time from any goroutine.
//
// It fails with ErrNotSupported unless the database was opened with
// Options.FaultInjection, and with ErrInvalidArgument for a negative
// duration, an unknown kind, or a delay plus jitter above MaxIODelay;
// either way nothing changes.
func (db *DB) SetIODelay(ops IOOps, delay, jitter time.Duration) error {
	if delay < 0 || jitter < 0 {
		return errorf(ErrInvalidArgument, "SetIODelay: negative delay %v or jitter %v", delay, jitter)
	}
	if delay > MaxIODelay || jitter > MaxIODelay-delay {
		return errorf(ErrInvalidArgument, "SetIODelay: delay %v + jitter %v exceeds %v", delay, jitter, MaxIODelay)
	}
	h, err := db.handle("SetIODelay")
	if err != nil {
		return err
	}
	st := C.shale_set_io_delay(h, C.uint32_t(ops), C.uint64_t(delay.Microseconds()), C.uint64_t(jitter.Microseconds()))
	db.mu.RUnlock()
	return statusToError("SetIODelay", st)
}
