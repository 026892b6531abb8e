package node

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// documentedMetrics reads docs/metrics.md's tables: name -> type.
func documentedMetrics(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 5 {
			t.Fatalf("docs/metrics.md: malformed row %q", line)
		}
		name := strings.Trim(strings.TrimSpace(cols[1]), "`")
		out[name] = strings.TrimSpace(cols[2])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("docs/metrics.md lists %d series; the tables did not parse", len(out))
	}
	return out
}

// scrape fetches and parses a node's /metrics.
func scrape(t *testing.T, tn *testNode) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+tn.httpAddr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

func sumOf(f *dto.MetricFamily) float64 {
	var s float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			s += m.GetCounter().GetValue()
		case m.Gauge != nil:
			s += m.GetGauge().GetValue()
		case m.Histogram != nil:
			s += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return s
}

// TestMetricsDocumented: a live node exports every series docs/metrics.md
// lists, with the documented type, and no shale_ or grpc_server_ series
// the document leaves out. The write and read before the scrape must move
// the request, proposal, latency and engine series.
func TestMetricsDocumented(t *testing.T) {
	doc := documentedMetrics(t)
	tn := startNode(t, "", Config{})
	put(t, tn, "k", "v")
	get(t, tn, "k")
	fams := scrape(t, tn)

	for name, typ := range doc {
		f := fams[name]
		if f == nil {
			t.Errorf("documented series %s is not exported", name)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != typ {
			t.Errorf("%s is a %s; docs/metrics.md says %s", name, got, typ)
		}
	}
	for name := range fams {
		if (strings.HasPrefix(name, "shale_") || strings.HasPrefix(name, "grpc_server_")) && doc[name] == "" {
			t.Errorf("%s is exported but not in docs/metrics.md", name)
		}
	}
	for _, name := range []string{
		"grpc_server_handled_total", "grpc_server_handling_seconds", "shale_raft_proposals_total",
		"shale_raft_commit_latency_seconds", "shale_raft_apply_latency_seconds",
		"shale_engine_user_bytes_written_total", "shale_ranges", "shale_ranges_leader",
	} {
		if f := fams[name]; f == nil || sumOf(f) == 0 {
			t.Errorf("%s did not move after a write and a read", name)
		}
	}
	if f := fams["shale_ranges_unavailable"]; f == nil || sumOf(f) != 0 {
		t.Errorf("shale_ranges_unavailable on a serving one-node cluster = %v, want 0", sumOf(f))
	}
}
