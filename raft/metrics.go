package raft

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the Store's Prometheus collectors. Register them with
// Metrics.Register.
type Metrics struct {
	rounds            prometheus.Counter
	visits            prometheus.Counter
	logSyncs          prometheus.Counter
	logBatchBytes     prometheus.Histogram
	logWriteSeconds   prometheus.Histogram
	entriesApplied    prometheus.Counter
	applyWrites       prometheus.Counter
	rangeApplies      prometheus.Counter
	messagesSent      prometheus.Counter
	messagesReceived  prometheus.Counter
	messagesDropped   prometheus.Counter
	messagesCoalesced prometheus.Counter
	// noticeAnswersDropped: answers to commit notices not sent
	// (commit_notice.go).
	noticeAnswersDropped prometheus.Counter
	// appendsWithoutWrite: appends completed in their Ready, without the
	// log writer (append_inline.go).
	appendsWithoutWrite prometheus.Counter
	heartbeatsSent      prometheus.Counter
	heartbeatsSkipped   prometheus.Counter
	nodeHeartbeatsSent  prometheus.Counter
	batchesSent         prometheus.Counter
	leaderChanges       prometheus.Counter
	snapshotsSent       prometheus.Counter
	snapshotsReceived   prometheus.Counter
	splits              prometheus.Counter
	merges              prometheus.Counter
	logTruncations      prometheus.Counter
	dedupHits           prometheus.Counter
	noSpaceWrites       prometheus.Counter
	appendsRefused      prometheus.Counter
	diskStalls          prometheus.Counter
	stallTransfers      prometheus.Counter
	quiescent           prometheus.Gauge
	quiesces            prometheus.Counter
	wakes               prometheus.Counter

	latencyMetrics // metrics_latency.go
}

const namespace, subsystem = "shale", "raft"

func newMetrics() *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
	}
	return &Metrics{
		rounds:   counter("rounds_total", "Processing rounds run (each collects the Ready of every range with work)."),
		visits:   counter("replica_visits_total", "Replicas handled by processing rounds: one per replica with work and round, the per-range cost that multiplies as writes spread over ranges."),
		logSyncs: counter("log_syncs_total", "Synced Raft log writes: one per round that had entries or a vote to persist, for all its ranges."),
		logBatchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: subsystem,
			Name: "log_batch_bytes", Help: "Size of the one log batch written per round.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 10)}),
		logWriteSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: subsystem,
			Name: "log_write_seconds", Help: "Time to write (and fsync) one log batch.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16)}),
		entriesApplied:       counter("entries_applied_total", "Committed entries applied."),
		applyWrites:          counter("apply_writes_total", "Engine writes made to apply committed entries: one per round for the client writes of all its ranges, plus one per apply of anything else."),
		rangeApplies:         counter("range_applies_total", "Batches of committed entries applied (one per range and Ready)."),
		messagesSent:         counter("messages_sent_total", "Raft messages handed to the transport."),
		messagesReceived:     counter("messages_received_total", "Raft messages received from peers."),
		messagesDropped:      counter("messages_dropped_total", "Raft messages that could not be delivered."),
		heartbeatsSent:       counter("heartbeats_sent_total", "Raft heartbeats and heartbeat responses sent, one per range and peer (quiesce heartbeats included)."),
		heartbeatsSkipped:    counter("heartbeats_skipped_total", "Raft heartbeats not sent because the range sent the follower an append since the previous tick."),
		nodeHeartbeatsSent:   counter("node_heartbeats_sent_total", "Node heartbeats sent (liveness.go): one per peer node every third of an election timeout."),
		batchesSent:          counter("transport_batches_sent_total", "Message batches sent to peers: one gRPC message each, carrying the messages of many ranges."),
		messagesCoalesced:    counter("messages_coalesced_total", "Empty appends not sent because a later append of the same round to the same peer carries their commit index."),
		appendsWithoutWrite:  counter("appends_without_write_total", "Raft appends with nothing to write (only the commit index moved) completed at once instead of through the log writer."),
		noticeAnswersDropped: counter("commit_notice_answers_dropped_total", "Answers to commit notices (appends without entries that only carry the commit index, to a follower the leader knows holds their index) not sent."),
		leaderChanges:        counter("leader_changes_seen_total", "Times a replica on this node became leader."),
		snapshotsSent:        counter("snapshots_sent_total", "Snapshots sent and applied by their receiver."),
		snapshotsReceived:    counter("snapshots_received_total", "Snapshots received (before Raft's verdict)."),
		splits:               counter("range_splits_total", "Range splits this node proposed and saw applied."),
		merges:               counter("range_merges_total", "Ranges merged into their left-hand neighbour on this node."),
		logTruncations:       counter("log_truncations_total", "Raft log truncations."),
		dedupHits:            counter("dedup_hits_total", "Client writes answered from a dedup record instead of applied again."),
		noSpaceWrites:        counter("no_space_writes_total", "Engine writes (log appends, applies) that found the disk full and waited for space instead of failing."),
		appendsRefused:       counter("appends_refused_disk_full_total", "Appends with entries and snapshots from peers refused because this node's disk is full (Raft resends them)."),

		diskStalls:     counter("disk_stalls_total", "Raft log fsyncs stuck for longer than the disk-stall threshold, counting only time the node was running (counted when noticed, while still in progress or once done)."),
		stallTransfers: counter("leadership_shed_disk_stall_total", "Leadership transfers a leader on a stalled disk started."),
		quiescent: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem,
			Name: "quiescent_replicas", Help: "Replicas on this node whose range is at rest: they neither tick nor heartbeat."}),
		quiesces: counter("quiesces_total", "Times a replica on this node put its range to rest (leader) or agreed to (follower)."),
		wakes:    counter("wakes_total", "Times a resting replica on this node woke up."),

		latencyMetrics: newLatencyMetrics(),
	}
}

// Rests returns how many times replicas of this node put their range to
// rest and woke up again (quiesce.go), for a simulator's report.
func (m *Metrics) Rests() (quiesces, wakes int) {
	read := func(c prometheus.Counter) int {
		var d dto.Metric
		if c.Write(&d) != nil {
			return 0
		}
		return int(d.GetCounter().GetValue())
	}
	return read(m.quiesces), read(m.wakes)
}

// Register registers every collector with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.rounds, m.logSyncs, m.logBatchBytes, m.logWriteSeconds, m.entriesApplied, m.applyWrites, m.rangeApplies,
		m.messagesSent, m.messagesReceived, m.messagesDropped, m.messagesCoalesced, m.noticeAnswersDropped, m.appendsWithoutWrite, m.visits, m.heartbeatsSent, m.heartbeatsSkipped, m.nodeHeartbeatsSent, m.batchesSent, m.leaderChanges, m.snapshotsSent,
		m.snapshotsReceived, m.splits, m.merges, m.logTruncations, m.dedupHits, m.noSpaceWrites, m.appendsRefused, m.diskStalls, m.stallTransfers,
		m.quiescent, m.quiesces, m.wakes} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, c := range m.latencyMetrics.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
