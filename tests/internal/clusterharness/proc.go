package clusterharness

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is one node process of a test cluster: started from a binary with
// its output appended to a log file, watched until it reports healthy,
// signalled by the tests, and started again after it died. It is safe for
// concurrent use (a nemesis, a poller and the test itself use it at once).
type Proc struct {
	httpAddr string // where /healthz answers
	logPath  string
	socks    []Socket // listeners every start inherits

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the current process has exited
	exitErr error         // the exit status, once exited
	paused  bool
	starts  int
}

// NewProc returns a Proc, not yet started, for a node serving HTTP on
// httpAddr and logging to logPath (appended to across restarts).
func NewProc(httpAddr, logPath string) *Proc {
	return &Proc{httpAddr: httpAddr, logPath: logPath}
}

// Inherit makes every later start hand the process a listener on each
// socket's port (PassListeners), so that a node serves on ports the test
// holds instead of binding ports it was told were free.
func (p *Proc) Inherit(socks ...Socket) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.socks = append(p.socks, socks...)
}

// Start starts bin with args, followed by firstArgs on the first start
// only (as a real deployment passes bootstrap flags once), and waits up to
// timeout until GET /healthz answers 200. A process that exits or stays
// unhealthy is an error quoting the log's last lines; one still running
// is left running (the caller's cleanup kills it).
func (p *Proc) Start(bin string, args, firstArgs []string, timeout time.Duration) error {
	p.mu.Lock()
	all := append([]string(nil), args...)
	if p.starts == 0 {
		all = append(all, firstArgs...)
	}
	p.starts++
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("opening its log: %w", err)
	}
	cmd := exec.Command(bin, all...)
	cmd.Stdout, cmd.Stderr = logf, logf
	closeListeners, err := PassListeners(cmd, p.socks...)
	if err != nil {
		p.mu.Unlock()
		logf.Close()
		return fmt.Errorf("listeners for %s: %w", bin, err)
	}
	err = cmd.Start()
	closeListeners()
	if err != nil {
		p.mu.Unlock()
		logf.Close()
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.exitErr, p.paused = cmd, exited, nil, false
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	p.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("exited during startup: %v\n%s", p.ExitErr(), Tail(p.Log(), 40))
		default:
		}
		if resp, err := http.Get("http://" + p.httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %v\n%s", timeout, Tail(p.Log(), 40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Starts counts the calls to Start.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Pid is the current process's ID, 0 before the first start.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process was started and has not exited (a
// paused process is running).
func (p *Proc) Running() bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// ExitErr is the last process's exit status (nil while it runs or after a
// clean exit).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Signal sends sig to the process, unless it is not running, and waits up
// to wait for it to exit. It reports whether the process is gone.
func (p *Proc) Signal(sig syscall.Signal, wait time.Duration) bool {
	p.mu.Lock()
	cmd, ch := p.cmd, p.exited
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
	}
	_ = cmd.Process.Signal(sig) // fails only if it is already gone
	select {
	case <-ch:
		return true
	case <-time.After(wait):
		return false
	}
}

// Kill sends SIGKILL (which also ends a paused process) and waits until the
// process is gone.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, ch := p.cmd, p.exited
	p.paused = false
	p.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // fails only if it is already gone
	<-ch
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (p *Proc) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("never started")
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP: %w", err)
	}
	p.paused = true
	return nil
}

// Resume sends SIGCONT to a process Pause stopped; otherwise it does
// nothing.
func (p *Proc) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		return nil
	}
	p.paused = false
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT: %w", err)
	}
	return nil
}

// Paused reports whether the process is stopped by Pause.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Log returns everything the process (and its earlier starts) logged.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}
