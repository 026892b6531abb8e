package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestShalectlHotKeys runs a workload where one key takes most requests
// and checks that `shalectl hot keys` names it as a single-key hotspot,
// that `hot ranges` and /metrics show its range's load, and that the
// spread keys are not called hotspots.
func TestShalectlHotKeys(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ep := node.grpcAddr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, []string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Put(ctx, []byte("hot/counter"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	// 4 of 5 requests read the hot key; the rest write 400 other keys.
	for i := 0; i < 2000; i++ {
		if i%5 == 4 {
			err = cl.Put(ctx, []byte(fmt.Sprintf("cold/%03d", i%400)), []byte("v"))
		} else {
			_, _, err = cl.Get(ctx, []byte("hot/counter"))
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, code := runCtl(t, ep, "hot", "keys", "--json")
	var hk struct {
		Keys []struct {
			NodeID            uint64  `json:"nodeId"`
			Key               string  `json:"key"`
			RangeID           uint64  `json:"rangeId"`
			RequestsPerSecond float64 `json:"requestsPerSecond"`
			RangeShare        float64 `json:"rangeShare"`
			SingleKeyHotspot  bool    `json:"singleKeyHotspot"`
		} `json:"keys"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &hk) != nil || len(hk.Keys) == 0 {
		t.Fatalf("hot keys --json = %q exit %d: %s", out, code, errOut)
	}
	top := hk.Keys[0]
	if top.Key != "hot/counter" || !top.SingleKeyHotspot || top.RangeID == 0 || top.NodeID != 1 || top.RequestsPerSecond <= 0 {
		t.Fatalf("hot keys: top entry %+v; want hot/counter named a single-key hotspot:\n%s", top, out)
	}
	for _, k := range hk.Keys[1:] {
		if k.SingleKeyHotspot {
			t.Fatalf("hot keys: %q (share %.2f) called a single-key hotspot:\n%s", k.Key, k.RangeShare, out)
		}
	}
	out, _, code = runCtl(t, ep, "hot", "keys")
	if code != 0 || !strings.Contains(out, "hot/counter") || !strings.Contains(out, "single-key hotspot: a split cannot spread it") {
		t.Fatalf("hot keys table:\n%s", out)
	}

	out, _, code = runCtl(t, ep, "hot", "ranges", "--json")
	var hr struct {
		Ranges []struct {
			RangeID           uint64  `json:"rangeId"`
			RequestsPerSecond float64 `json:"requestsPerSecond"`
			BytesPerSecond    float64 `json:"bytesPerSecond"`
			CPUShare          float64 `json:"cpuShare"`
		} `json:"ranges"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &hr) != nil || len(hr.Ranges) == 0 {
		t.Fatalf("hot ranges --json = %q exit %d", out, code)
	}
	if r := hr.Ranges[0]; r.RangeID != top.RangeID || r.RequestsPerSecond <= 0 || r.BytesPerSecond <= 0 || r.CPUShare <= 0.5 {
		t.Fatalf("hot ranges: busiest %+v; want range %d with its load", r, top.RangeID)
	}
	resp, err := http.Get("http://" + node.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`shale_hot_range_requests_per_second{range="%d"}`, top.RangeID)
	if !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %s", want)
	}
}
