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
type raftLogger struct {
	l *slog.Logger
}

var _ etcdraft.Logger = raftLogger{}

func (r raftLogger) log(level slog.Level, msg string) {
	r.l.Log(context.Background(), level, msg)
}

// expectedInfo lists raft's Info messages that are normal operation, not
// news, for Shale: they are logged at debug level.
//
// With AsyncStorageWrites an append acknowledgement can arrive after a
// later one already made its entries stable, and raft then reports the
// older one's index missing from its unstable log (etcd-io/raft issue
// 307); under a write load that is many times a second.
var expectedInfo = map[string]bool{
	"entry at index %d missing from unstable log; ignoring": true,
}

func infoLevel(format string) slog.Level {
	if expectedInfo[format] {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

func (r raftLogger) Debug(v ...any) { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.log(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Info(v ...any) { r.log(slog.LevelInfo, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) {
	r.log(infoLevel(format), fmt.Sprintf(format, v...))
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
