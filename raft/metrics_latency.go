package raft

import "github.com/prometheus/client_golang/prometheus"

// latencyMetrics are the proposal, latency and snapshot-volume series,
// embedded in Metrics (kept apart so that each metric family has one
// obvious home):
//
//	shale_raft_proposals_total                  entries handed to Raft by this node
//	shale_raft_proposals_dropped_total          proposals Raft refused (not in the log)
//	shale_raft_proposals_overwritten_total      proposals a later leader's log overwrote (answered NotLeader)
//	shale_raft_commit_latency_seconds           handed to Raft -> committed, for this node's proposals
//	shale_raft_apply_latency_seconds            one batch of committed entries -> applied
//	shale_raft_write_rounds                     rounds the node began from handing a proposal to Raft to applying it
//	shale_raft_snapshot_bytes_sent_total        snapshot payload streamed to peers
//	shale_raft_snapshot_bytes_received_total    snapshot payload received from peers
//	shale_raft_conf_changes_applied_total       replica (membership) changes applied
type latencyMetrics struct {
	proposals             prometheus.Counter
	proposalsDropped      prometheus.Counter
	proposalsOverwritten  prometheus.Counter
	commitLatency         prometheus.Histogram
	applyLatency          prometheus.Histogram
	writeRounds           prometheus.Histogram
	snapshotBytesSent     prometheus.Counter
	snapshotBytesReceived prometheus.Counter
	confChangesApplied    prometheus.Counter
}

func newLatencyMetrics() latencyMetrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
	}
	histogram := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help,
			// 25µs to ~1.6s: a batched in-memory apply up to a commit
			// stuck behind a slow follower's fsync.
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17)})
	}
	// What a closed-loop writer waits for, in rounds: at least two on
	// the leader (propose; commit and apply once a follower's answer is
	// in), more when rounds run for other work meanwhile.
	writeRounds := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: subsystem,
		Name: "write_rounds", Help: "Processing rounds this node began from handing one of its proposals to Raft to applying it.",
		Buckets: prometheus.LinearBuckets(1, 1, 16)})
	return latencyMetrics{
		proposals:             counter("proposals_total", "Entries this node handed to Raft (client writes, replica changes, internal commands)."),
		proposalsDropped:      counter("proposals_dropped_total", "Proposals Raft refused: not the leader, a transfer under way, or too much uncommitted."),
		proposalsOverwritten:  counter("proposals_overwritten_total", "Proposals made by a leader that lost leadership before they committed, found overwritten by a later term's entries and answered NotLeader."),
		commitLatency:         histogram("commit_latency_seconds", "Time from handing a proposal to Raft to finding it committed, for this node's proposals."),
		applyLatency:          histogram("apply_latency_seconds", "Time to apply one batch of committed entries to the engine."),
		writeRounds:           writeRounds,
		snapshotBytesSent:     counter("snapshot_bytes_sent_total", "Snapshot payload bytes streamed to peers."),
		snapshotBytesReceived: counter("snapshot_bytes_received_total", "Snapshot payload bytes received from peers."),
		confChangesApplied:    counter("conf_changes_applied_total", "Replica set changes (adds, removals, promotions) applied by replicas on this node."),
	}
}

func (m *latencyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.proposals, m.proposalsDropped, m.proposalsOverwritten, m.commitLatency, m.applyLatency, m.writeRounds,
		m.snapshotBytesSent, m.snapshotBytesReceived, m.confChangesApplied}
}
