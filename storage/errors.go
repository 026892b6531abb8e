package storage

// #include <stdlib.h>
// #include "shale/engine.h"
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// Sentinel errors. Every error the engine returns is an *EngineError that
// matches exactly one of these with errors.Is, and keeps the engine's
// message (which names the file and offset involved, when there is one).
var (
	// ErrNotFound: the key does not exist. Get reports it; reads of many
	// keys report it per key instead.
	ErrNotFound = errors.New("storage: not found")
	// ErrCorruption: stored data failed a checksum or does not parse. The
	// data is not returned; the message says which file and offset.
	ErrCorruption = errors.New("storage: corruption")
	// ErrNotSupported: the engine build does not support the operation yet.
	ErrNotSupported = errors.New("storage: not supported")
	// ErrInvalidArgument: the caller passed something the engine refuses.
	ErrInvalidArgument = errors.New("storage: invalid argument")
	// ErrIO: an I/O error other than a full disk.
	ErrIO = errors.New("storage: I/O error")
	// ErrNoSpace: the disk is full. Writes fail until space returns and
	// DB.Resume is called; reads keep working.
	ErrNoSpace = errors.New("storage: no space left on device")
	// ErrBackgroundError: writes are stopped by an earlier background
	// failure (flush or compaction); the message says which. DB.Resume
	// clears it once the cause is gone.
	ErrBackgroundError = errors.New("storage: writes stopped by a background error")
	// ErrClosed: the DB (or the iterator, snapshot or writer used) is closed.
	ErrClosed = errors.New("storage: closed")
	// ErrBusy: the operation could not proceed now (a write stall with
	// NoSlowdown set, or Close while iterators or snapshots are open).
	// Nothing was changed.
	ErrBusy = errors.New("storage: busy")
)

// Status codes of engine.h. DO NOT CHANGE: they mirror the C enum, whose
// values are frozen.
const (
	codeOK              = C.SHALE_OK
	codeNotFound        = C.SHALE_NOT_FOUND
	codeCorruption      = C.SHALE_CORRUPTION
	codeNotSupported    = C.SHALE_NOT_SUPPORTED
	codeInvalidArgument = C.SHALE_INVALID_ARGUMENT
	codeIOError         = C.SHALE_IO_ERROR
	codeNoSpace         = C.SHALE_NO_SPACE
	codeBufferTooSmall  = C.SHALE_BUFFER_TOO_SMALL
	codeBackgroundError = C.SHALE_BACKGROUND_ERROR
	codeClosed          = C.SHALE_CLOSED
	codeBusy            = C.SHALE_BUSY
)

// EngineError is an error reported by the engine: its status code, its
// message, and the storage operation that got it. errors.Is matches it
// against the sentinel for its code.
type EngineError struct {
	Op   string // the DB method, e.g. "Write"
	Code int    // a SHALE_* status code
	Msg  string // the engine's message, possibly empty
}

func (e *EngineError) Error() string {
	s := "storage: " + e.Op + ": " + codeName(e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Is reports whether target is the sentinel for e's code.
func (e *EngineError) Is(target error) bool {
	return target != nil && target == sentinelFor(e.Code)
}

func sentinelFor(code int) error {
	switch code {
	case codeNotFound:
		return ErrNotFound
	case codeCorruption:
		return ErrCorruption
	case codeNotSupported:
		return ErrNotSupported
	case codeInvalidArgument:
		return ErrInvalidArgument
	case codeIOError:
		return ErrIO
	case codeNoSpace:
		return ErrNoSpace
	case codeBackgroundError:
		return ErrBackgroundError
	case codeClosed:
		return ErrClosed
	case codeBusy:
		return ErrBusy
	}
	return nil
}

func codeName(code int) string {
	switch code {
	case codeOK:
		return "ok"
	case codeNotFound:
		return "not found"
	case codeCorruption:
		return "corruption"
	case codeNotSupported:
		return "not supported"
	case codeInvalidArgument:
		return "invalid argument"
	case codeIOError:
		return "I/O error"
	case codeNoSpace:
		return "no space left on device"
	case codeBufferTooSmall:
		return "buffer too small"
	case codeBackgroundError:
		return "writes stopped by a background error"
	case codeClosed:
		return "closed"
	case codeBusy:
		return "busy"
	}
	return fmt.Sprintf("unknown status code %d", code)
}

// statusToError converts a status returned by the engine into an error,
// releasing the engine-allocated message. It returns nil for SHALE_OK.
func statusToError(op string, st C.shale_status_t) error {
	if st.code == codeOK {
		if st.message != nil {
			C.shale_free(unsafe.Pointer(st.message))
		}
		return nil
	}
	e := &EngineError{Op: op, Code: int(st.code)}
	if st.message != nil {
		e.Msg = trimCodeName(e.Code, C.GoString(st.message))
		C.shale_free(unsafe.Pointer(st.message))
	}
	return e
}

// engineCodeNames are the names the engine puts before its messages
// (util/status.cc). EngineError.Error already names the code, so the
// engine's prefix is dropped rather than repeated.
var engineCodeNames = map[int]string{
	codeNotFound:        "NotFound: ",
	codeCorruption:      "Corruption: ",
	codeNotSupported:    "Not supported: ",
	codeInvalidArgument: "Invalid argument: ",
	codeIOError:         "IO error: ",
	codeNoSpace:         "No space: ",
	codeBufferTooSmall:  "Buffer too small: ",
	codeBackgroundError: "Background error: ",
	codeClosed:          "Closed: ",
	codeBusy:            "Busy: ",
}

func trimCodeName(code int, msg string) string {
	return strings.TrimPrefix(msg, engineCodeNames[code])
}

// freeStatus releases a status's message without converting it, for calls
// whose status the caller interprets by code alone (BUFFER_TOO_SMALL).
func freeStatus(st C.shale_status_t) {
	if st.message != nil {
		C.shale_free(unsafe.Pointer(st.message))
	}
}

// errorf returns an error that matches sentinel with errors.Is and says what
// went wrong, for failures found on the Go side of the boundary.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
