package node

import "github.com/prometheus/client_golang/prometheus"

// watchMetrics are the Watch service's (docs/metrics.md). None is per
// watcher or per range: lag is a histogram over every watcher, so the
// series stay few however many watchers a node serves.
type watchMetrics struct {
	watchers    prometheus.GaugeFunc
	events      prometheus.Counter
	cutoffs     prometheus.Counter
	eventLag    prometheus.Histogram
	progressLag prometheus.Histogram
}

func newWatchMetrics(n *Node) watchMetrics {
	// 1 ms to ~65 s.
	buckets := prometheus.ExponentialBuckets(0.001, 2, 17)
	return watchMetrics{
		watchers: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shale_watchers",
			Help: "Watch streams this node serves (as the leader of their ranges).",
		}, func() float64 { return float64(n.watches.watchers()) }),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_watch_events_sent_total",
			Help: "Watch events this node sent, over every watcher (history read at a watch's start included).",
		}),
		cutoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_watch_cutoffs_total",
			Help: "Watchers cut off (ResourceExhausted) for falling behind by more than the per-watcher buffer; their clients resume.",
		}),
		eventLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shale_watch_event_lag_seconds",
			Help:    "How far behind the node's clock each watch event's version was when it was sent (history read at a watch's start included).",
			Buckets: buckets,
		}),
		progressLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shale_watch_progress_lag_seconds",
			Help:    "How far behind the node's clock each progress notice sent to a watcher was: how stale a watcher's view of its span is.",
			Buckets: buckets,
		}),
	}
}

func (m watchMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.watchers, m.events, m.cutoffs, m.eventLag, m.progressLag}
}
