package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// splitSizeBytes is the node's default split size (node ShardingOptions):
// the largest range a backup normally exports in one attempt.
const splitSizeBytes = 64 << 20

// TestBackupDefaultRate checks that backup create is throttled unless told
// otherwise, and that the default lets a full-size range export within one
// attempt with room to spare (docs/backup.md, "Throttling").
func TestBackupDefaultRate(t *testing.T) {
	cmd := newBackupCreateCmd(&globals{})
	f := cmd.Flags().Lookup("rate")
	if f == nil {
		t.Fatal("backup create has no --rate flag")
	}
	if want := "4194304"; f.DefValue != want || client.DefaultBackupBytesPerSecond != 4<<20 {
		t.Fatalf("--rate default %s (DefaultBackupBytesPerSecond %d), want %s: update docs/backup.md and the help with it",
			f.DefValue, client.DefaultBackupBytesPerSecond, want)
	}
	// The floor: a 64 MiB range within one 5-minute attempt, with at least
	// a 4× margin for slow disks and the SST file's write.
	minRate := float64(splitSizeBytes) / backupAttemptTimeout.Seconds()
	if got := float64(client.DefaultBackupBytesPerSecond); got < 4*minRate {
		t.Fatalf("default rate %.0f B/s is under 4× the %.0f B/s a %d-byte range needs in %v", got, minRate, splitSizeBytes, backupAttemptTimeout)
	}
	if took := time.Duration(float64(splitSizeBytes) / float64(client.DefaultBackupBytesPerSecond) * float64(time.Second)); took > backupAttemptTimeout/4 {
		t.Fatalf("a full range takes %v at the default rate, over a quarter of the attempt (%v)", took, backupAttemptTimeout)
	}
	// --rate 0 is accepted (no limit) and is a distinct value from the default.
	if err := cmd.Flags().Set("rate", "0"); err != nil {
		t.Fatalf("--rate 0: %v", err)
	}
	if got := cmd.Flags().Lookup("rate").Value.String(); got != "0" {
		t.Fatalf("--rate 0 parsed as %s", got)
	}
}

// TestBackupNegativeRate checks that a negative --rate is refused with a
// message naming the flag, before any connection is made.
func TestBackupNegativeRate(t *testing.T) {
	cmd := newBackupCreateCmd(&globals{})
	cmd.SetArgs([]string{"dest", "--rate", "-1"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--rate must not be negative") {
		t.Fatalf("backup create --rate -1: %v, want an error naming --rate", err)
	}
}
