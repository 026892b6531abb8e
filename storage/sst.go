package storage

/*
#include <stdlib.h>
#include "shale/engine.h"
*/
import "C"

import "unsafe"

// SSTWriter builds an SST file outside any database, for ingestion with
// DB.Ingest (the fast path for Raft snapshots and bulk loads). Entries must
// be added in strictly increasing key order. An SSTWriter is not safe for
// concurrent use.
type SSTWriter struct {
	c    *C.shale_sst_writer_t
	path string
}

// NewSSTWriter creates the file at path, using opts' block, filter and
// compression settings (nil: engine defaults).
func NewSSTWriter(path string, opts *Options) (*SSTWriter, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	var copts C.shale_options_t
	opts.toC(&copts)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var c *C.shale_sst_writer_t
	if err := statusToError("NewSSTWriter", C.shale_sst_writer_open(&copts, cpath, &c)); err != nil {
		return nil, err
	}
	return &SSTWriter{c: c, path: path}, nil
}

// Put adds an entry. key must be greater than every key added before.
func (w *SSTWriter) Put(key, value []byte) error {
	if w.c == nil {
		return errorf(ErrClosed, "SSTWriter.Put: %s is finished or closed", w.path)
	}
	return statusToError("SSTWriter.Put", C.shale_sst_writer_put(w.c,
		cBytesNonNil(key), C.size_t(len(key)), cBytesNonNil(value), C.size_t(len(value))))
}

// DeleteRange records a range tombstone over [start, end): once the file
// is ingested it hides older data in the span, but not the file's own
// entries.
func (w *SSTWriter) DeleteRange(start, end []byte) error {
	if w.c == nil {
		return errorf(ErrClosed, "SSTWriter.DeleteRange: %s is finished or closed", w.path)
	}
	return statusToError("SSTWriter.DeleteRange", C.shale_sst_writer_delete_range(w.c,
		cBytesNonNil(start), C.size_t(len(start)), cBytesNonNil(end), C.size_t(len(end))))
}

// Finish writes the index, filter and footer, syncs and closes the file,
// releases the writer and returns the file's size.
func (w *SSTWriter) Finish() (uint64, error) {
	if w.c == nil {
		return 0, errorf(ErrClosed, "SSTWriter.Finish: %s is finished or closed", w.path)
	}
	var size C.uint64_t
	st := C.shale_sst_writer_finish(w.c, &size)
	C.shale_sst_writer_free(w.c)
	w.c = nil
	if err := statusToError("SSTWriter.Finish", st); err != nil {
		return 0, err
	}
	return uint64(size), nil
}

// Close abandons an unfinished writer, deleting its file. After Finish it
// does nothing.
func (w *SSTWriter) Close() {
	if w.c != nil {
		C.shale_sst_writer_free(w.c)
		w.c = nil
	}
}

// Ingest moves SST files made by SSTWriter into the database atomically:
// afterwards every entry and range tombstone of every file is visible, as
// one write newer than everything before it.
func (db *DB) Ingest(paths ...string) error {
	if len(paths) == 0 {
		return nil
	}
	// The array of C strings lives in C memory for the call.
	arr := unsafe.Slice((**C.char)(C.malloc(C.size_t(len(paths))*C.size_t(unsafe.Sizeof((*C.char)(nil))))), len(paths))
	for i, p := range paths {
		arr[i] = C.CString(p)
	}
	defer func() {
		for _, p := range arr {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(&arr[0]))
	}()
	h, err := db.handle("Ingest")
	if err != nil {
		return err
	}
	st := C.shale_ingest(h, C.size_t(len(paths)), &arr[0])
	db.mu.RUnlock()
	return statusToError("Ingest", st)
}

// Checkpoint writes a consistent copy of the database to dir, which must
// not exist: SSTs are hard-linked, the MANIFEST and WAL copied. The copy
// opens as an ordinary database.
func (db *DB) Checkpoint(dir string) error {
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	h, err := db.handle("Checkpoint")
	if err != nil {
		return err
	}
	st := C.shale_checkpoint(h, cdir)
	db.mu.RUnlock()
	return statusToError("Checkpoint", st)
}
