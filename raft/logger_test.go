package raft

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// syncBuffer is a bytes.Buffer that several stores may log to at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRaftLoggerKeepsWarningsAndErrors: the library's warnings and errors
// keep their level; its Info messages go to debug.
func TestRaftLoggerKeepsWarningsAndErrors(t *testing.T) {
	var buf syncBuffer
	l := raftLogger{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), rangeID: 7, replicaID: 3}
	l.Infof("%x became follower at term %d", 1, 5)
	l.Info("newRaft 1 [peers: []]")
	if buf.String() != "" {
		t.Fatalf("the library's Info messages were logged at info level: %s", buf.String())
	}
	l.Warningf("%x stepped down to follower since quorum is not active", 1)
	l.Errorf("%x failed to apply %d", 1, 7)
	out := buf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "quorum is not active") ||
		!strings.Contains(out, "level=ERROR") || !strings.Contains(out, "failed to apply 7") ||
		!strings.Contains(out, "range=7 replica=3 src=etcd-raft") {
		t.Fatalf("warnings and errors lost their level or their range, replica or src attribute: %q", out)
	}
}

// TestInfoLogHasNoLibraryChatter runs a three-node cluster through
// startup, an election, a leader failure and a few writes with the
// stores logging at info level, and checks that no line is the Raft
// library's routine commentary (it used to be most of a node's log).
func TestInfoLogHasNoLibraryChatter(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.Logger = logger })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		if _, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprint("k", i), "v"); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	l := c.leader(keys.FirstUserRangeID)
	// A leader change makes the library talk: votes, term changes.
	c.stop(l.id)
	c.leader(keys.FirstUserRangeID)
	if _, err := c.put(ctx, keys.FirstUserRangeID, "after", "v"); err != nil {
		t.Fatalf("put after the leader stopped: %v", err)
	}
	chatter := []string{"became follower", "became candidate", "became pre-candidate", "newRaft",
		"switched to configuration", "starting a new election", "received MsgVoteResp", "received MsgPreVoteResp",
		"sent MsgVote", "sent MsgPreVote", "cast MsgVote", "cast MsgPreVote", "missing from unstable log"}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var bad []string
	for _, line := range lines {
		for _, c := range chatter {
			if strings.Contains(line, c) {
				bad = append(bad, line)
				break
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d info-level lines are the Raft library's chatter, e.g.:\n%s", len(bad), len(lines), strings.Join(bad[:min(5, len(bad))], "\n"))
	}
	if !strings.Contains(buf.String(), "became leader") {
		t.Fatalf("Shale's own leadership line is missing from the info log:\n%s", buf.String())
	}
}
