package node

import "time"

// ShardingOptions tune automatic splits and placement (docs/sharding.md).
// Every zero field keeps its default.
type ShardingOptions struct {
	// SplitSizeBytes: a range whose live data (the bytes of its keys'
	// newest live versions) exceeds this is split at the key that halves
	// its bytes on disk (64 MiB).
	SplitSizeBytes uint64
	// SplitQPS: a range serving more requests per second than this, over
	// SplitCheckInterval, is split at a key that divides its sampled
	// traffic (2500; negative disables load splits).
	SplitQPS float64
	// SplitHostCPU: a range is split by load only while the host of one
	// of its voters (this node's included) had less than this fraction of
	// its CPU time busy over the last 10 s, so that the halves' work can
	// go to a CPU with time to spare (0.8; 1 or more, or negative: split
	// by load whatever the CPU use).
	SplitHostCPU float64
	// SplitCheckInterval is how often each leader checks its ranges' size
	// and load (10 s).
	SplitCheckInterval time.Duration
	// DisableAutoSplit turns size and load splits off (manual splits
	// still work).
	DisableAutoSplit bool

	// PlacementInterval is how often the placement controller (on the
	// meta range's leader) runs a pass (10 s).
	PlacementInterval time.Duration
	// DeadNodeTimeout: a node not heard from for this long is dead, and
	// its replicas are re-created on other nodes (5 min).
	DeadNodeTimeout time.Duration
	// ReplicationFactor is the number of voters placement keeps per range,
	// when there are enough live nodes (3).
	ReplicationFactor int
	// MaxMovesPerPass bounds the replica moves one placement pass starts
	// (4); a move streams a snapshot, limited by the snapshot rate.
	MaxMovesPerPass int
	// DisablePlacement turns the controller off.
	DisablePlacement bool

	// MergeSizeBytes: two adjacent ranges each with less live data than
	// this (and together under half SplitSizeBytes) are merged once they
	// have also been cold for MergeDelay (SplitSizeBytes/4).
	MergeSizeBytes uint64
	// MergeQPS: a range serving fewer requests per second than this is
	// cold (SplitQPS/4; with load splits off, 625).
	MergeQPS float64
	// MergeDelay is how long a pair must stay small and cold before the
	// placement controller merges it, so that a fresh split (by hand or
	// by load) is not undone at once (5 min).
	MergeDelay time.Duration
	// DisableAutoMerge turns automatic merges off (manual merges still
	// work).
	DisableAutoMerge bool
}

func (o *ShardingOptions) setDefaults() {
	if o.SplitSizeBytes == 0 {
		o.SplitSizeBytes = 64 << 20
	}
	if o.SplitQPS == 0 {
		o.SplitQPS = 2500
	}
	if o.SplitHostCPU == 0 {
		o.SplitHostCPU = 0.8
	}
	if o.SplitCheckInterval <= 0 {
		o.SplitCheckInterval = 10 * time.Second
	}
	if o.PlacementInterval <= 0 {
		o.PlacementInterval = 10 * time.Second
	}
	if o.DeadNodeTimeout <= 0 {
		o.DeadNodeTimeout = 5 * time.Minute
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = 3
	}
	if o.MaxMovesPerPass <= 0 {
		o.MaxMovesPerPass = 4
	}
	if o.MergeSizeBytes == 0 {
		o.MergeSizeBytes = o.SplitSizeBytes / 4
	}
	if o.MergeQPS <= 0 {
		o.MergeQPS = 625
		if o.SplitQPS > 0 {
			o.MergeQPS = o.SplitQPS / 4
		}
	}
	if o.MergeDelay <= 0 {
		o.MergeDelay = 5 * time.Minute
	}
}
