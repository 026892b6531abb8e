package node

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	return httpDo(t, http.MethodGet, url)
}

func TestHTTPEndpoints(t *testing.T) {
	tn := startNode(t, "", Config{HTTP: HTTPOptions{Pprof: true}})
	put(t, tn, "k", "v")
	get(t, tn, "k")
	if code, body := httpGet(t, "http://"+tn.httpAddr+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	code, body := httpGet(t, "http://"+tn.httpAddr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="shale.kv.v1.KV",grpc_type="unary"} 1`,
		`grpc_server_handling_seconds_count{grpc_method="Get",grpc_service="shale.kv.v1.KV",grpc_type="unary"} 1`,
		"shale_engine_user_keys_written_total",
		"shale_engine_write_amplification",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := httpGet(t, "http://"+tn.httpAddr+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ = %d", code)
	}
}

func TestStatus(t *testing.T) {
	tn := startNode(t, "", Config{NodeID: 7})
	st, err := tn.admin.Status(ctxT(t), &kvpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Node.GetNodeId() != 7 || st.Node.GetAddress() == "" || st.Node.GetHttpAddress() != tn.httpAddr ||
		!strings.HasPrefix(st.ClusterId, "shale-") || st.Engine == nil || len(st.Ranges) != 2 || st.Version == "" {
		t.Fatalf("Status = %v", st)
	}
	// The host's CPU use, measured from the node's start (Linux, where
	// the tests run) once a clock tick has passed.
	for deadline := time.Now().Add(5 * time.Second); !st.GetCpu().GetKnown() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if st, err = tn.admin.Status(ctxT(t), &kvpb.StatusRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if cpu := st.GetCpu(); !cpu.GetKnown() || cpu.GetHostBusy() < 0 || cpu.GetHostBusy() > 1 ||
		cpu.GetHostCpus() == 0 || cpu.GetWindowSeconds() <= 0 || cpu.GetProcessCores() < 0 {
		t.Fatalf("Status.Cpu = %v", cpu)
	}
	// A peer asking for the CPU alone gets no ranges nor engine figures.
	small, err := tn.admin.Status(ctxT(t), &kvpb.StatusRequest{NodeOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if small.GetNode().GetNodeId() != 7 || len(small.GetRanges()) != 0 || small.GetEngine() != nil || !small.GetCpu().GetKnown() {
		t.Fatalf("node-only Status = %v", small)
	}
	if _, err := tn.admin.Split(ctxT(t), &kvpb.SplitRequest{}); err == nil {
		t.Fatal("Split succeeded on a single node")
	}
}

// TestRestartKeepsDataAndIdentity: a graceful stop closes the engine, a
// restart sees every write under the 0x03 user prefix, and another node ID
// is refused on the same directory.
func TestRestartKeepsDataAndIdentity(t *testing.T) {
	tn := startNode(t, "", Config{NodeID: 3})
	put(t, tn, "k", "v")
	cluster := tn.n.ClusterID()
	tn.stop(t)
	if code, _ := httpGetNoFail(tn.httpAddr); code == 200 {
		t.Fatal("/healthz still answers after Stop")
	}

	db, err := storage.Open(tn.dir+"/engine", keys.WithUserVersions(&storage.Options{ErrorIfMissing: true}))
	if err != nil {
		t.Fatal(err)
	}
	if kv, found, err := keys.UserKeyspace.Get(db, []byte("k"), hlc.MaxTimestamp); err != nil || !found || string(kv.Value) != "v" {
		t.Fatalf("user key k in the versioned keyspace = %q %v, %v", kv.Value, found, err)
	}
	if _, err := db.Get([]byte("k")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the user key is stored without its prefix: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := New(Config{NodeID: 4, DataDir: tn.dir}); err == nil || !strings.Contains(err.Error(), "belongs to node 3") {
		t.Fatalf("New with another node ID = %v", err)
	}
	again := startNode(t, tn.dir, Config{NodeID: 3})
	if v, found := get(t, again, "k"); !found || v != "v" {
		t.Fatalf("after restart Get = %q, %v", v, found)
	}
	if again.n.ClusterID() != cluster {
		t.Fatalf("cluster ID changed across restart: %s -> %s", cluster, again.n.ClusterID())
	}
}

func httpGetNoFail(addr string) (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestStopCancelsAtItsDeadline(t *testing.T) {
	tn := startNode(t, "", Config{})
	put(t, tn, "k", "v")
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := tn.n.Stop(ctx); err != nil {
		t.Fatalf("Stop with an immediate deadline: %v", err)
	}
	// Idempotent.
	if err := tn.n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
