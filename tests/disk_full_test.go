package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// A node whose data directory is a small file system that fills up
// (docs/operations.md, "A full disk"): it stays up, serves reads, refuses
// writes with a definite ResourceExhausted naming itself and the
// directory, says so in its status, metrics and shalectl status, hands its
// leadership to a node with room, and takes writes again by itself once
// space is freed; restarted on a full disk it comes up read-only. No
// acknowledged write is lost.

// diskFullFlags give every node a reserve and memtable that fit a 64 MiB
// file system.
var diskFullFlags = []string{"--disk-reserve", "8388608", "--engine-write-buffer-size", "4194304"}

// mountTmpfs mounts a tmpfs of size (e.g. "64m") on dir, or skips the
// test where that is not possible.
func mountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a full disk is a size-limited tmpfs mounted on a node's data directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s): a full disk needs a size-limited file system", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
}

// fillDisk writes a file in dir until the file system has no space left
// and returns its path.
func fillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for chunk := 1 << 20; chunk >= 4096; chunk /= 4 {
		buf := make([]byte, chunk)
		for i := 0; i < 1<<16; i++ {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	return path
}

// diskOf is node id's disk as its status reports it.
func (c *testCluster) diskOf(id uint64) (*kvpb.NodeDisk, error) {
	_, admin, done := c.raw(id)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := admin.Status(ctx, &kvpb.StatusRequest{NodeOnly: true})
	if err != nil {
		return nil, err
	}
	return st.GetDisk(), nil
}

// waitDisk waits until node id reports its disk full (or not).
func (c *testCluster) waitDisk(id uint64, full bool, timeout time.Duration) *kvpb.NodeDisk {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d, err := c.diskOf(id)
		if err == nil && d.GetFull() == full {
			return d
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d: disk full = %v after %v, want %v (err %v)", id, d.GetFull(), timeout, full, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDiskFullNodeRefusesWritesServesReadsAndRecovers(t *testing.T) {
	var dir1 string
	c := newClusterPrepared(t, 3, nil, func(cn *clusterNode) {
		if cn.id == 1 {
			dir1 = cn.dataDir
			mountTmpfs(t, cn.dataDir, "64m")
		}
	}, diskFullFlags...)
	cl := c.client()
	ctx := context.Background()
	waitFor(t, 30*time.Second, "node 1 leads the user range", func() bool {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.TransferLeader(tctx, userRange, 1) == nil
	})
	if d := c.waitDisk(1, false, 10*time.Second); d.GetReserveFileBytes() != 8<<20 {
		t.Fatalf("node 1's reserve file holds %d bytes, want %d", d.GetReserveFileBytes(), 8<<20)
	}

	acked := map[string]string{}
	put := func(k, v string) error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := cl.Put(wctx, []byte(k), []byte(v))
		if err == nil {
			acked[k] = v
		}
		return err
	}
	val := strings.Repeat("v", 1024)
	for i := 0; i < 200; i++ {
		if err := put(fmt.Sprintf("before-%04d", i), val); err != nil {
			t.Fatalf("write before the disk filled: %v", err)
		}
	}

	// Fill node 1's disk. Writes to the range it leads are refused,
	// definitely, with an error that names the node and the directory.
	filler := fillDisk(t, dir1)
	var refused error
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; refused == nil; i++ {
		err := put(fmt.Sprintf("full-%04d", i), val)
		switch {
		case err == nil:
			// Taken before node 1 noticed; acknowledged, so kept.
		case errors.Is(err, client.ErrResourceExhausted):
			refused = err
		default:
			t.Fatalf("a write to a full node failed with %v, want ErrResourceExhausted", err)
		}
		if refused == nil && time.Now().After(deadline) {
			t.Fatal("writes to the range node 1 leads still succeed 20s after its disk filled")
		}
	}
	if msg := refused.Error(); !strings.Contains(msg, "node 1") || !strings.Contains(msg, dir1) || !strings.Contains(msg, "disk full") {
		t.Errorf("the refusal does not name the node, the disk and the cause: %v", refused)
	}
	d := c.waitDisk(1, true, 5*time.Second)
	if !c.node(1).running() {
		t.Fatalf("node 1 exited on a full disk: %v\n%s", c.node(1).err(), tail(c.node(1).log(), 30))
	}
	t.Logf("node 1 full: %s (%d bytes available, reserve file %d)", d.GetReason(), d.GetAvailableBytes(), d.GetReserveFileBytes())

	// Reads go on: linearizable ones through node 1, the leader.
	checkAll := func(when string) {
		t.Helper()
		for k, v := range acked {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			got, found, err := cl.Get(rctx, []byte(k))
			cancel()
			if err != nil || !found || string(got) != v {
				t.Fatalf("%s: reading acknowledged %s: found %v, %d bytes, err %v", when, k, found, len(got), err)
			}
		}
	}
	checkAll("on a full disk")
	if v := c.metric(1, "shale_disk_full"); v != 1 {
		t.Errorf("shale_disk_full on node 1 = %v, want 1", v)
	}
	out, _, code := runCtl(t, c.node(2).grpcAddr, "status")
	if code != 0 || !strings.Contains(out, "WARNING: node 1: disk full") || !strings.Contains(out, "FULL") {
		t.Errorf("shalectl status (exit %d) does not show node 1's full disk:\n%s", code, out)
	}

	// Node 1 hands the leadership to a node with room, and writes to the
	// range go on while its disk is still full.
	waitFor(t, 30*time.Second, "node 1 handed its leadership to a node with room", func() bool {
		l, _ := c.leader(userRange, 5*time.Second)
		return l != 1
	})
	if err := put("moved", "while node 1 is full"); err != nil {
		t.Fatalf("a write once the leadership left the full node: %v", err)
	}

	// Space returns: node 1 takes writes again by itself, as the leader.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c.waitDisk(1, false, 20*time.Second)
	waitFor(t, 30*time.Second, "node 1 leads the range again", func() bool {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.TransferLeader(tctx, userRange, 1) == nil
	})
	deadline = time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		err := put(fmt.Sprintf("resumed-%04d", i), val)
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrResourceExhausted) || time.Now().After(deadline) {
			t.Fatalf("writes do not resume once space is back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < 50; i++ {
		if err := put(fmt.Sprintf("after-%04d", i), val); err != nil {
			t.Fatalf("write after space returned: %v", err)
		}
	}
	checkAll("after space returned")
	if v := c.metric(1, "shale_disk_full"); v != 0 {
		t.Errorf("shale_disk_full on node 1 = %v after space returned, want 0", v)
	}

	// Restarted on a full disk, node 1 comes up read-only: it serves its
	// replica's data and says it is full.
	c.node(1).kill()
	filler = fillDisk(t, dir1)
	c.start(1)
	d = c.waitDisk(1, true, 10*time.Second)
	t.Logf("node 1 restarted full: %s", d.GetReason())
	for k, v := range acked {
		if strings.HasPrefix(k, "after-") {
			got, found, err := c.staleGet(1, k)
			if err != nil || !found || got != v {
				t.Fatalf("node 1 restarted on a full disk: reading its replica's %s: found %v err %v", k, found, err)
			}
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c.waitDisk(1, false, 20*time.Second)
	if err := put("last", "write"); err != nil {
		t.Fatalf("write after node 1's restart: %v", err)
	}
	leader, _ := c.leader(userRange, 10*time.Second)
	rs, err := c.rangeState(leader, userRange)
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(1, userRange, rs.GetRaft().GetAppliedIndex(), 30*time.Second)
	for k, v := range acked {
		got, found, err := c.staleGet(1, k)
		if err != nil || !found || got != v {
			t.Fatalf("node 1 lost acknowledged %s: found %v err %v", k, found, err)
		}
	}
	checkAll("at the end")
}
