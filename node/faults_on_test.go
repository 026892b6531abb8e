//go:build faults

package node

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDiskDelayEndpoint: a faults build slows the engine's syncs on
// request, which slows every replicated write (the Raft log writer waits
// on the WAL sync), refuses bad input without changing anything, and
// clears the delay on DELETE.
func TestDiskDelayEndpoint(t *testing.T) {
	tn := startNode(t, "", Config{})
	url := "http://" + tn.httpAddr + "/debug/faults/disk"
	put(t, tn, "warm", "up")
	if code, body := httpDo(t, http.MethodGet, url); code != 200 || body != "none\n" {
		t.Fatalf("GET = %d %q, want none", code, body)
	}

	const delay = 60 * time.Millisecond
	code, body := httpDo(t, http.MethodPut, url+"?delay="+delay.String()+"&jitter=20ms")
	if code != 200 || body != "sync 60ms +0-20ms\n" {
		t.Fatalf("PUT = %d %q", code, body)
	}
	start := time.Now()
	put(t, tn, "k", "v")
	if took := time.Since(start); took < delay {
		t.Errorf("a write took %v under a %v sync delay", took, delay)
	}

	for _, bad := range []struct{ query, want string }{
		{"?delay=abc", "delay: "},
		{"?delay=-1s", "negative"},
		{"?delay=2m", "exceeds"},
		{"?ops=fsync&delay=1ms", "unknown I/O operation"},
		{"", "missing or zero"},
	} {
		if code, body := httpDo(t, http.MethodPut, url+bad.query); code != http.StatusBadRequest || !strings.Contains(body, bad.want) {
			t.Errorf("PUT %s = %d %q, want 400 with %q", bad.query, code, body, bad.want)
		}
	}
	if code, body := httpDo(t, http.MethodPut, url+"?ops=append,read&delay=1ms"); code != 200 || body != "append 1ms +0-0s\nread 1ms +0-0s\nsync 60ms +0-20ms\n" {
		t.Fatalf("PUT append,read = %d %q", code, body)
	}
	if code, body := httpDo(t, http.MethodDelete, url); code != 200 || body != "none\n" {
		t.Fatalf("DELETE = %d %q", code, body)
	}
	if code, body := httpDo(t, http.MethodGet, url); code != 200 || body != "none\n" {
		t.Fatalf("GET after DELETE = %d %q", code, body)
	}
	if v, found := get(t, tn, "k"); !found || v != "v" {
		t.Fatalf("Get(k) = %q, %v", v, found)
	}
}
