package node

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPprofOffByDefault: without HTTPOptions.Pprof the profiles are not
// served.
func TestPprofOffByDefault(t *testing.T) {
	tn := startNode(t, "", Config{})
	put(t, tn, "k", "v") // gRPC is serving too, so the node stops cleanly
	if code, _ := httpGet(t, "http://"+tn.httpAddr+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without Pprof = %d, want 404", code)
	}
	if code, _ := httpGet(t, "http://"+tn.httpAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
}

// TestHTTPOverTLS: with HTTPOptions.TLS, /metrics and /healthz answer
// HTTPS with the node's certificate, checked against the cluster CA, and
// plaintext HTTP gets no answer from them.
func TestHTTPOverTLS(t *testing.T) {
	ca, files := boundPKI(t)
	tn := startNode(t, "", Config{NodeID: 1, Security: SecurityConfig{TLS: files("n1")}, HTTP: HTTPOptions{TLS: true}})
	cfg := tlsConfig(t, ca, "", "")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := hc.Get("https://" + tn.httpAddr + path)
		if err != nil {
			t.Fatalf("GET https %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
			t.Fatalf("GET https %s = %d (TLS %v)", path, resp.StatusCode, resp.TLS != nil)
		}
		if path == "/metrics" && !strings.Contains(string(body), "shale_engine_write_amplification") {
			t.Fatalf("/metrics over TLS lacks the engine's series")
		}
	}
	resp, err := http.Get("http://" + tn.httpAddr + "/metrics")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext GET /metrics answered 200 with HTTP TLS on")
		}
	}
}

// TestHTTPTLSNeedsTheNodeCertificate: HTTPS without the node's TLS is a
// configuration error, not a silently plaintext server.
func TestHTTPTLSNeedsTheNodeCertificate(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), HTTP: HTTPOptions{TLS: true}}
	err := cfg.setDefaults()
	if err == nil || !strings.Contains(err.Error(), "HTTP over TLS") {
		t.Fatalf("validate = %v, want the HTTP TLS refusal", err)
	}
}
