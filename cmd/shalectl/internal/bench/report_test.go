package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// fakeRecorder records n writes of latency lat each, and errs failures.
func fakeRecorder(n int, lat time.Duration, errs int) *recorder {
	r := &recorder{}
	r.hist[opWrite] = hdrhistogram.New(1, maxLatencyUs, 3)
	for range n {
		r.hist[opWrite].RecordValue(lat.Microseconds())
	}
	r.items[opWrite] = int64(n)
	r.errs[opWrite] = int64(errs)
	if errs > 0 {
		r.firstErr = errors.New("write: boom")
	}
	return r
}

func TestReportMergesWorkers(t *testing.T) {
	cfg := Config{Workload: "put"}.withDefaults()
	rep := newReport(Target{System: "shale", Endpoints: []string{"a:1"}}, cfg)
	// 99 fast requests and one slow one: p50 is fast, max is slow.
	rep.fill([]*recorder{fakeRecorder(60, time.Millisecond, 0), fakeRecorder(39, time.Millisecond, 2), fakeRecorder(1, time.Second, 0)}, 2*time.Second)
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1 (writes only)", len(rep.Results))
	}
	res := rep.Results[0]
	if res.Op != "write" || res.Ops != 100 || res.Errors != 2 || res.OpsPerSec != 50 {
		t.Fatalf("result = %+v", res)
	}
	if res.P50Us < 990 || res.P50Us > 1010 || res.MaxUs < 990_000 {
		t.Fatalf("p50 %dµs, max %dµs: want about 1ms and 1s", res.P50Us, res.MaxUs)
	}
	if rep.Errors() != 2 || rep.FirstError != "write: boom" {
		t.Fatalf("errors %d, first %q", rep.Errors(), rep.FirstError)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shale put: 16 clients", "ops/s", "p99", "write", "1.00ms", "first error: write: boom"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestJSONRoundTripAndComparison(t *testing.T) {
	dir := t.TempDir()
	n := 0
	write := func(system, workload string, ops int, lat time.Duration) *Report {
		cfg := Config{Workload: workload, Clients: 64}.withDefaults()
		rep := newReport(Target{System: system}, cfg)
		rep.fill([]*recorder{fakeRecorder(ops, lat, 0)}, time.Second)
		n++
		p := filepath.Join(dir, fmt.Sprintf("r%d.json", n))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := rep.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
		back, err := ReadReport(p)
		if err != nil {
			t.Fatal(err)
		}
		return back
	}
	// Three alternating rounds: the medians are 3000 vs 1000 ops/s and
	// 2ms vs 4ms p99, whatever the outliers.
	reports := []*Report{
		write("shale", "put", 3000, 2*time.Millisecond), write("etcd", "put", 1000, 4*time.Millisecond),
		write("shale", "put", 100, 50*time.Millisecond), write("etcd", "put", 5000, time.Millisecond),
		write("shale", "put", 3500, time.Millisecond), write("etcd", "put", 900, 5*time.Millisecond),
	}
	var out bytes.Buffer
	if err := WriteComparison(&out, reports); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"| measure | shale | etcd | shale/etcd |", "| put | 64 | 3 | write ops/s | 3000 | 1000 | 3.00× |",
		"| put | 64 | 3 | write p99 | 2.00ms | 4.00ms | 0.50× |", "| put | 64 | 3 | write errors | 0 | 0 |  |"} {
		if !strings.Contains(s, want) {
			t.Errorf("comparison lacks %q:\n%s", want, s)
		}
	}
	// A workload run on one system only cannot be compared.
	if err := WriteComparison(&out, append(reports, write("shale", "get", 10, time.Millisecond))); err == nil {
		t.Error("comparing a get run on one system: no error")
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"x":1}`), 0o644)
	if _, err := ReadReport(bad); err == nil {
		t.Error("ReadReport of a non-report: no error")
	}
}

// TestComparisonOfThreeSystems compares Shale with two labelled versions
// of etcd, with the servers' usage: one column per system, a ratio column
// per other system, medians per measure.
func TestComparisonOfThreeSystems(t *testing.T) {
	run := func(system, label string, ops int, cpu float64, written, device int64) *Report {
		cfg := Config{Workload: "put", Clients: 64, Label: label}.withDefaults()
		rep := newReport(Target{System: system}, cfg)
		rep.fill([]*recorder{fakeRecorder(ops, time.Millisecond, 0)}, time.Second)
		rep.Server = &Usage{Pids: []int{1, 2, 3}, CPUSeconds: cpu, WriteBytes: written, Device: "vda", DeviceBytes: device}
		return rep
	}
	// Per write, Shale's runs spend 100µs, 100µs and 1s of CPU; etcd
	// 3.7's 200µs (and an outlier); etcd 3.4's 400µs.
	reports := []*Report{
		run("shale", "", 1000, 0.1, 1000_000, 2000_000),
		run("etcd", "etcd 3.7", 500, 0.1, 1000_000, 500_000),
		run("etcd", "etcd 3.4", 250, 0.1, 500_000, 250_000),
		run("etcd", "etcd 3.4", 250, 0.1, 500_000, 250_000),
		run("etcd", "etcd 3.7", 500, 5, 500_000, 500_000),
		run("shale", "", 1000, 0.1, 1000_000, 2000_000),
		run("shale", "", 1000, 1000, 1000_000, 2000_000),
		run("etcd", "etcd 3.7", 500, 0.1, 1000_000, 500_000),
		run("etcd", "etcd 3.4", 250, 0.1, 500_000, 250_000),
	}
	var out bytes.Buffer
	if err := WriteComparison(&out, reports); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"| workload | clients | runs | measure | shale | etcd 3.7 | etcd 3.4 | shale/etcd 3.7 | shale/etcd 3.4 |\n|---|---:|---|---|---:|---:|---:|---:|---:|\n",
		"| put | 64 | 3 | write ops/s | 1000 | 500 | 250 | 2.00× | 4.00× |",
		"| put | 64 | 3 | server CPU per request | 100µs | 200µs | 400µs | 0.50× | 0.25× |",
		"| put | 64 | 3 | bytes servers wrote per request | 1000 B | 2000 B | 2000 B | 0.50× | 0.50× |",
		"| put | 64 | 3 | bytes to the device per request | 2000 B | 1000 B | 1000 B | 2.00× | 2.00× |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("comparison lacks %q:\n%s", want, s)
		}
	}
	// A run that did not watch its servers drops the usage rows.
	reports[0].Server = nil
	out.Reset()
	if err := WriteComparison(&out, reports); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "CPU") {
		t.Errorf("usage rows with an unwatched run:\n%s", out.String())
	}
	// Every workload needs runs of the same systems.
	only := run("shale", "", 10, 0, 0, 0)
	only.Workload = "get"
	if err := WriteComparison(&out, append(reports, only)); err == nil {
		t.Error("a get run of one system among three-system puts: no error")
	}
}
