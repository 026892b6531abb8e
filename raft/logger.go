package raft

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	etcdraft "go.etcd.io/raft/v3"
)

// raftLogger adapts slog to etcd-io/raft's Logger interface. Raft's own
// Fatal and Panic mean a broken invariant: they panic, as the library
// expects, after logging.
//
// The library's Info messages are its running commentary (a replica
// became follower or candidate, sent or ignored a vote, switched to a
// configuration, found an acknowledged entry already stable under
// AsyncStorageWrites, etcd-io/raft issue 307); under a light load they
// were most of a node's log. They are logged at debug level. What an
// operator needs at info level Shale logs itself (a replica became
// leader: replica_ready.go; replicas added or removed: confchange.go).
// Warnings and errors keep their level. Every line of the library
// carries src=etcd-raft, so that it can be filtered either way, and the
// range and replica (when set) it is about.
//
// The range and replica are added to each line rather than bound with
// slog's With, which copies the handler's state for every replica of the
// node (a few hundred bytes each, for lines that are rarely written).
type raftLogger struct {
	l                  *slog.Logger
	rangeID, replicaID uint64
}

var _ etcdraft.Logger = raftLogger{}

func (r raftLogger) log(level slog.Level, msg string) {
	if r.rangeID == 0 {
		r.l.Log(context.Background(), level, msg, "src", "etcd-raft")
		return
	}
	r.l.Log(context.Background(), level, msg, "range", r.rangeID, "replica", r.replicaID, "src", "etcd-raft")
}

func (r raftLogger) Debug(v ...any) { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.log(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Info(v ...any) { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) {
	r.log(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Warning(v ...any) { r.log(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.log(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any) { r.log(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
}
func (r raftLogger) Fatal(v ...any) {
	r.log(slog.LevelError, fmt.Sprint(v...))
	os.Exit(1)
}
func (r raftLogger) Fatalf(format string, v ...any) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
	os.Exit(1)
}
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.log(slog.LevelError, s)
	panic(s)
}
func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.log(slog.LevelError, s)
	panic(s)
}
