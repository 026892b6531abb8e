package node

import "time"

// ShardingOptions tune automatic splits and placement (docs/sharding.md).
// Every zero field keeps its default.
type ShardingOptions struct {
	// SplitSizeBytes: a range whose approximate size (the engine's
	// estimate from its files) exceeds this is split at its middle key
	// (64 MiB).
	SplitSizeBytes uint64
	// SplitQPS: a range serving more requests per second than this, over
	// SplitCheckInterval, is split at a key that divides its sampled
	// traffic (2500; negative disables load splits).
	SplitQPS float64
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
}

func (o *ShardingOptions) setDefaults() {
	if o.SplitSizeBytes == 0 {
		o.SplitSizeBytes = 64 << 20
	}
	if o.SplitQPS == 0 {
		o.SplitQPS = 2500
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
}
