package node

import (
	"fmt"
	"time"
)

// GCOptions tune history retention and garbage collection (docs/versions.md,
// "Retention window and garbage collection"; the queue is gc_queue.go).
// Every zero field keeps its default.
type GCOptions struct {
	// Retention is how long versions are kept: reads as of a time older
	// than this may fail with "history compacted" (DefaultRetention).
	Retention time.Duration
	// Interval is how often each leader looks at its ranges for history
	// to collect (a tenth of Retention, at most a minute, at least a
	// second).
	Interval time.Duration
	// MaxDeletesPerCommand and MaxKeysPerCommand bound the work of one GC
	// command, which every replica applies in line with the range's
	// writes (1000 deletes, 10000 keys looked at).
	MaxDeletesPerCommand int
	MaxKeysPerCommand    int
	// Disable turns the GC queue off: thresholds stay where they are and
	// history is kept.
	Disable bool
}

// DefaultRetention is the default retention window: TiKV's default GC life
// time. It covers a paged consistent scan, a transaction and a watch that
// reconnects; docs/versions.md gives the reasons.
const DefaultRetention = 10 * time.Minute

// MinRetention is the shortest retention accepted: below it, the pages of
// an ordinary scan could outlive the history they read.
const MinRetention = time.Second

func (o *GCOptions) setDefaults() error {
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Retention < MinRetention {
		return fmt.Errorf("node: GC retention %v is below the minimum of %v", o.Retention, MinRetention)
	}
	if o.Interval < 0 || o.MaxDeletesPerCommand < 0 || o.MaxKeysPerCommand < 0 {
		return fmt.Errorf("node: GC options must not be negative (interval %v, max deletes %d, max keys %d)",
			o.Interval, o.MaxDeletesPerCommand, o.MaxKeysPerCommand)
	}
	if o.Interval == 0 {
		o.Interval = min(max(o.Retention/10, time.Second), time.Minute)
	}
	if o.MaxDeletesPerCommand == 0 {
		o.MaxDeletesPerCommand = 1000
	}
	if o.MaxKeysPerCommand == 0 {
		o.MaxKeysPerCommand = 10000
	}
	return nil
}
