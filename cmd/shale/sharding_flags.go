package main

import (
	"flag"

	"github.com/shaledb/shale/node"
)

// shardingFlags registers the flags of automatic splits and placement
// (docs/sharding.md) on fs.
func shardingFlags(fs *flag.FlagSet) *node.ShardingOptions {
	o := &node.ShardingOptions{}
	fs.Uint64Var(&o.SplitSizeBytes, "split-size", 64<<20, "split a range whose approximate size exceeds this many bytes")
	fs.Float64Var(&o.SplitQPS, "split-qps", 2500, "split a range serving more requests per second than this, at a key dividing its traffic; negative: never by load")
	fs.DurationVar(&o.SplitCheckInterval, "split-check-interval", 0, "how often leaders check their ranges' size and load (0: 10s)")
	fs.BoolVar(&o.DisableAutoSplit, "disable-auto-split", false, "turn size and load splits off (manual splits still work)")
	fs.DurationVar(&o.PlacementInterval, "placement-interval", 0, "how often the placement controller runs a pass (0: 10s)")
	fs.DurationVar(&o.DeadNodeTimeout, "dead-node-timeout", 0, "a node not heard from for this long is dead and its replicas are re-created elsewhere (0: 5m)")
	fs.IntVar(&o.ReplicationFactor, "replication-factor", 3, "voters per range that placement keeps when enough nodes are live")
	fs.IntVar(&o.MaxMovesPerPass, "placement-max-moves", 4, "replica moves one placement pass starts")
	fs.BoolVar(&o.DisablePlacement, "disable-placement", false, "turn the placement controller off")
	return o
}
