package raft

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRaftLoggerDemotesExpectedInfo: raft's routine async-write message is
// logged at debug level, other Info messages stay at info.
func TestRaftLoggerDemotesExpectedInfo(t *testing.T) {
	var buf bytes.Buffer
	l := raftLogger{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	l.Infof("entry at index %d missing from unstable log; ignoring", 42)
	if buf.Len() != 0 {
		t.Fatalf("the expected message was logged at info level: %s", buf.String())
	}
	l.Infof("%x became leader at term %d", 1, 5)
	if !strings.Contains(buf.String(), "level=INFO") || !strings.Contains(buf.String(), "became leader at term 5") {
		t.Fatalf("an ordinary Info message was not logged at info level: %q", buf.String())
	}
}
