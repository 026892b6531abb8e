package node

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaledb/shale/api/kvpb"
)

// HotSpots reports this node's busiest ranges and sampled keys (hot.go).
func (s *adminServer) HotSpots(_ context.Context, req *kvpb.HotSpotsRequest) (*kvpb.HotSpotsResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = hotDefaultLimit
	}
	span, ranges, keys := s.n.hot.report(limit)
	resp := &kvpb.HotSpotsResponse{NodeId: s.n.ident.NodeID, WindowSeconds: span.Seconds(), SampleRate: 1.0 / hotSampleEvery}
	for _, r := range ranges {
		hr := &kvpb.HotRange{RangeId: r.rangeID, RequestsPerSecond: r.requestsPerSec, BytesPerSecond: r.bytesPerSec, CpuShare: r.cpuShare}
		if rep, err := s.n.store.Replica(r.rangeID); err == nil {
			if d := rep.Descriptor(); d != nil {
				hr.StartKey, hr.EndKey = d.GetStartKey(), d.GetEndKey()
			}
			hr.Leader = rep.Status().State == "leader"
		}
		resp.Ranges = append(resp.Ranges, hr)
	}
	for _, k := range keys {
		resp.Keys = append(resp.Keys, &kvpb.HotKey{Key: k.key, RangeId: k.rangeID, RequestsPerSecond: k.requestsPerSec,
			ErrorPerSecond: k.errorPerSec, RangeShare: k.rangeShare})
	}
	return resp, nil
}

// hotCollector exports the load of this node's busiest ranges: at most
// hotMetricRanges ranges per scrape, so the series stay few however many
// ranges the node holds (a range drops out when others overtake it).
type hotCollector struct{ n *Node }

var (
	hotRangeRequests = prometheus.NewDesc("shale_hot_range_requests_per_second",
		fmt.Sprintf("Requests per second this node served for one of its %d busiest ranges (last window).", hotMetricRanges), []string{"range"}, nil)
	hotRangeBytes = prometheus.NewDesc("shale_hot_range_bytes_per_second",
		"Request and response bytes per second of one of the busiest ranges (last window).", []string{"range"}, nil)
	hotRangeCPU = prometheus.NewDesc("shale_hot_range_cpu_share",
		"One of the busiest ranges' share of this node's request-serving time (an estimate of its CPU share; last window).", []string{"range"}, nil)
)

func (c *hotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hotRangeRequests
	ch <- hotRangeBytes
	ch <- hotRangeCPU
}

func (c *hotCollector) Collect(ch chan<- prometheus.Metric) {
	_, ranges, _ := c.n.hot.report(hotMetricRanges)
	for _, r := range ranges {
		id := fmt.Sprint(r.rangeID)
		ch <- prometheus.MustNewConstMetric(hotRangeRequests, prometheus.GaugeValue, r.requestsPerSec, id)
		ch <- prometheus.MustNewConstMetric(hotRangeBytes, prometheus.GaugeValue, r.bytesPerSec, id)
		ch <- prometheus.MustNewConstMetric(hotRangeCPU, prometheus.GaugeValue, r.cpuShare, id)
	}
}
