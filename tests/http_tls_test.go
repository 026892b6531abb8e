package tests

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/internal/certs"
	"github.com/shaledb/shale/tests/internal/clusterharness"
)

// TestHTTPOverTLSAndPprofFlag starts a node with --http-tls: `shalectl
// health --http https://...` checks it against the cluster CA, plain HTTP
// gets no page, and pprof answers 404 without --pprof.
func TestHTTPOverTLSAndPprofFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	ip := fmt.Sprintf("%s.%d", testNet(), ipBase+1)
	if out, errOut, code := ctl(t, nil, "certs", "create-cluster", "--certs-dir", dir, "--bind-node-ids", "n1="+ip); code != 0 {
		t.Fatalf("create-cluster: %s%s", out, errOut)
	}
	nd := filepath.Join(dir, "n1")
	grpcPort, httpPort := reservePort(t, ip), reservePort(t, ip)
	grpcAddr, httpAddr := grpcPort.Addr(), httpPort.Addr()
	shale, _ := binaries(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(shale, "--listen", grpcAddr, "--http", httpAddr, "--data-dir", filepath.Join(t.TempDir(), "d"),
		"--tls-ca", filepath.Join(nd, certs.CACertFile), "--tls-cert", filepath.Join(nd, certs.NodeCertFile),
		"--tls-key", filepath.Join(nd, certs.NodeKeyFile), "--http-tls")
	cmd.Stdout, cmd.Stderr = logf, logf
	closeListeners, err := clusterharness.PassListeners(cmd, clusterharness.Socket{Flag: "--listen-fd", Port: grpcPort},
		clusterharness.Socket{Flag: "--http-fd", Port: httpPort})
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	closeListeners()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	health := []string{"--tls-ca", filepath.Join(dir, certs.CACertFile), "--timeout", "2s", "health", "--http", "https://" + httpAddr}
	waitUntil(t, 30*time.Second, "shalectl health over HTTPS", func() string {
		out, errOut, code := ctl(t, nil, health...)
		if code != 0 || out != "ok\n" {
			return fmt.Sprintf("exit %d: %s%s", code, out, errOut)
		}
		return ""
	})
	if _, errOut, code := ctl(t, nil, "--timeout", "2s", "health", "--http", "https://"+httpAddr); code == 0 || !strings.Contains(errOut, "--tls-ca") {
		t.Fatalf("health over HTTPS without the CA: exit %d, %q; want a request for --tls-ca", code, errOut)
	}
	if resp, err := http.Get("http://" + httpAddr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP /metrics answered 200 with --http-tls")
		}
	}
	cfg, err := client.LoadTLSConfig(filepath.Join(dir, certs.CACertFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	for path, want := range map[string]int{"/metrics": http.StatusOK, "/debug/pprof/": http.StatusNotFound} {
		resp, err := hc.Get("https://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET https %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}
