package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shaledb/shale/tests/internal/clusterharness"
)

// This file runs the real binaries: it builds bin/shale and bin/shalectl
// (or uses $SHALE_BIN and $SHALECTL_BIN) and starts nodes as processes on
// 127.0.0.1.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binaries returns the paths of shale and shalectl, building them once per
// test process.
func binaries(t testing.TB) (shale, shalectl string) {
	t.Helper()
	if s, c := os.Getenv("SHALE_BIN"), os.Getenv("SHALECTL_BIN"); s != "" && c != "" {
		return s, c
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "shale-bin-")
		if buildErr != nil {
			return
		}
		root := repoRootPath()
		// Stamp the link with the engine library's digest, as the Makefile
		// does, so that a changed engine is never served by a stale binary.
		ldflags := ""
		if lib, err := os.ReadFile(filepath.Join(root, "build", "engine", "libshale_engine.a")); err == nil {
			sum := sha256.Sum256(lib)
			ldflags = "-X github.com/shaledb/shale/storage.engineStamp=" + hex.EncodeToString(sum[:8])
		}
		for _, cmd := range []string{"shale", "shalectl"} {
			build := exec.Command("go", "build", "-ldflags", ldflags, "-o", filepath.Join(buildDir, cmd), "./cmd/"+cmd)
			build.Dir = root // go test runs in tests/; the packages are at the root
			out, err := build.CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build ./cmd/%s: %v\n%s", cmd, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "shale"), filepath.Join(buildDir, "shalectl")
}

var (
	faultsOnce sync.Once
	faultsBin  string
	faultsErr  error
)

// faultsBinary returns the path of a shale built with the `faults` tag
// (node/faults_on.go: the /debug/faults/disk endpoint that slows the
// engine's file operations), building it once per test process, or
// $SHALE_FAULTS_BIN.
func faultsBinary(t testing.TB) string {
	t.Helper()
	if s := os.Getenv("SHALE_FAULTS_BIN"); s != "" {
		return s
	}
	binaries(t) // the build directory
	faultsOnce.Do(func() {
		ldflags := ""
		if lib, err := os.ReadFile(filepath.Join(repoRootPath(), "build", "engine", "libshale_engine.a")); err == nil {
			sum := sha256.Sum256(lib)
			ldflags = "-X github.com/shaledb/shale/storage.engineStamp=" + hex.EncodeToString(sum[:8])
		}
		dir := buildDir
		if dir == "" { // $SHALE_BIN given: no build directory yet
			if dir, faultsErr = os.MkdirTemp("", "shale-bin-"); faultsErr != nil {
				return
			}
			buildDir = dir
		}
		faultsBin = filepath.Join(dir, "shale-faults")
		build := exec.Command("go", "build", "-tags", "faults", "-ldflags", ldflags, "-o", faultsBin, "./cmd/shale")
		build.Dir = repoRootPath()
		if out, err := build.CombinedOutput(); err != nil {
			faultsErr = fmt.Errorf("go build -tags faults ./cmd/shale: %v\n%s", err, out)
		}
	})
	if faultsErr != nil {
		t.Fatal(faultsErr)
	}
	return faultsBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func repoRootPath() string {
	wd, _ := os.Getwd()
	return filepath.Dir(wd) // tests/ is one level below the root
}

// nodeProc is one running shale process.
type nodeProc struct {
	t        *testing.T
	cmd      *exec.Cmd
	dataDir  string
	grpcAddr string
	httpAddr string
	grpcPort *clusterharness.Port
	httpPort *clusterharness.Port
	extra    []string
	logPath  string
	exited   chan struct{}
	exitErr  error
}

// startNode starts shale on dataDir, on ports of 127.0.0.1 it holds for
// the test, and waits until /healthz says ok.
func startNode(t *testing.T, dataDir string, extra ...string) *nodeProc {
	t.Helper()
	return startNodeOn(t, dataDir, nil, nil, extra...)
}

// startNodeOn is startNode serving on the given held ports (nil: one of
// 127.0.0.1), which the node inherits listeners on.
func startNodeOn(t *testing.T, dataDir string, grpcPort, httpPort *clusterharness.Port, extra ...string) *nodeProc {
	t.Helper()
	shale, _ := binaries(t)
	if grpcPort == nil {
		grpcPort = reservePort(t, "127.0.0.1")
	}
	if httpPort == nil {
		httpPort = reservePort(t, "127.0.0.1")
	}
	grpcAddr, httpAddr := grpcPort.Addr(), httpPort.Addr()
	logPath := filepath.Join(t.TempDir(), "shale.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--node-id", "1", "--listen", grpcAddr, "--http", httpAddr, "--data-dir", dataDir, "--log-format", "json"}, extra...)
	cmd := exec.Command(shale, args...)
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
	p := &nodeProc{t: t, cmd: cmd, dataDir: dataDir, grpcAddr: grpcAddr, httpAddr: httpAddr, grpcPort: grpcPort, httpPort: httpPort,
		extra: extra, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("shale exited during startup: %v\n%s", p.exitErr, p.log())
		default:
		}
		if resp, err := http.Get("http://" + httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("shale not healthy after 30s\n%s", p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restart starts the node again, on the same data directory, addresses
// and flags, once its process has exited.
func (p *nodeProc) restart() *nodeProc {
	p.t.Helper()
	return startNodeOn(p.t, p.dataDir, p.grpcPort, p.httpPort, p.extra...)
}

func (p *nodeProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *nodeProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits for a graceful exit, failing the test if the
// process does not exit cleanly within 20s.
func (p *nodeProc) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.exitErr != nil {
			p.t.Fatalf("shale exited with %v after SIGTERM\n%s", p.exitErr, p.log())
		}
	case <-time.After(20 * time.Second):
		p.t.Fatalf("shale still running 20s after SIGTERM\n%s", p.log())
	}
}

// runCtl runs shalectl with args against endpoint and returns its stdout,
// stderr and exit code.
func runCtl(t *testing.T, endpoint string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCtlInput(t, endpoint, nil, args...)
}

// runCtlInput is runCtl with stdin read from in (nil: no input).
func runCtlInput(t *testing.T, endpoint string, in []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	_, ctl := binaries(t)
	cmd := exec.Command(ctl, args...)
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	cmd.Env = append(os.Environ(), "SHALE_ENDPOINTS="+endpoint)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("shalectl %v: %v", args, err)
	}
	return o.String(), e.String(), code
}
