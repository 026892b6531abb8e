package storage

// This file holds the cgo directives shared by every file of the package and
// the small helpers that move bytes across the boundary.
//
// The engine is the static library that `make engine` builds with CMake into
// build/engine. It is C++, so the C++ runtime and snappy come along.

/*
#cgo CFLAGS: -I${SRCDIR}/../engine-c/include
#cgo LDFLAGS: -L${SRCDIR}/../build/engine -lshale_engine -lsnappy -lstdc++ -lm -lpthread
#include <stdlib.h>
#include "shale/engine.h"
*/
import "C"

import "unsafe"

// engineStamp is set by the Makefile (-ldflags -X) to a digest of the engine
// library. The go command does not notice when a static C library named in
// #cgo LDFLAGS changes, so without the stamp it could reuse a binary linked
// against an older engine; a changed stamp changes the link and forces a
// relink. Empty when built without make.
var engineStamp string

// EngineStamp returns the digest of the engine library this binary was
// linked with, as recorded by the Makefile, or "" when built without it.
func EngineStamp() string { return engineStamp }

// EngineVersion returns the engine's version string, e.g. "shale-engine 0.1.0".
func EngineVersion() string { return C.GoString(C.shale_version()) }

// cBytes returns a pointer to b's first byte for the duration of a cgo call,
// or nil for an empty slice. The C function must copy anything it keeps: Go
// memory may be passed to C only for the duration of the call (cgo pointer
// rules), and b must hold no Go pointers (a []byte never does).
func cBytes(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

// cBytesNonNil is cBytes for arguments the engine requires to be non-NULL
// even when empty (keys and values of length 0).
func cBytesNonNil(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return (*C.uint8_t)(unsafe.Pointer(&zeroByte))
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

// zeroByte gives empty byte strings a valid address to point at.
var zeroByte byte

// cSizes returns a pointer to s's first element for the duration of a call.
func cSizes(s []C.size_t) *C.size_t {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}
