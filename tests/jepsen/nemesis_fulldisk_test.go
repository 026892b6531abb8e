package jepsen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// The full-disk nemesis fills the file systems of some nodes and frees
// them again (docs/operations.md, "A full disk"). Its runs give every
// node a data directory of its own: a size-limited tmpfs (so it needs
// root), with a disk reserve and memtable sized to match
// (smallDiskFlags).
//
// A full node must stay up, refuse the writes of the ranges it leads with
// a definite ResourceExhausted (which the checker counts as "not
// applied"), keep serving reads, and take writes again once the space is
// back; nothing acknowledged may be lost. Half the time the victim is a
// range's leader; a quarter of the time a majority of the nodes fill, so
// that ranges also lose the quorum of followers that take appends. Before
// filling, the nemesis hands a range's leadership to a victim (as the
// slow disk does, with the same helper), so that some range is led from a
// full disk and refuses writes until the victim hands it to a node with
// room (after 5 s full: node/disk_leadership.go).

// smallDiskSize is each node's file system in a full-disk run.
const smallDiskSize = "128m"

// smallDiskFlags fit a node to smallDiskSize: an 8 MiB reserve, 4 MiB
// memtables.
var smallDiskFlags = []string{"--disk-reserve", "8388608", "--engine-write-buffer-size", "4194304"}

// fillerName is the file the nemesis fills a node's disk with.
const fillerName = "nemesis-filler"

// mountSmallDisk mounts a tmpfs of smallDiskSize on dir and returns "", or
// says why it cannot.
func mountSmallDisk(t testing.TB, dir string) string {
	if os.Geteuid() != 0 {
		return "a full disk needs root to mount a size-limited tmpfs per node"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+smallDiskSize, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Sprintf("mounting a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
	return ""
}

func needSmallDisks(r *run) string {
	if !r.c.smallDisks {
		return "the cluster was started without small disks (full-disk runs alone, not in combination)"
	}
	return r.c.smallDiskErr
}

// diskFillFault frees the disks it filled.
type diskFillFault struct{ nodes []*node }

func (f diskFillFault) heal(*run) error {
	var errs []error
	for _, nd := range f.nodes {
		if err := os.Remove(filepath.Join(nd.dataDir, fillerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("freeing n%d's disk: %w", nd.id, err))
		}
	}
	return errors.Join(errs...)
}

// fullDisk fills the disks of a random range's leader, of one random
// node, or of a majority of the nodes, once a range's leadership is on
// one of them.
func fullDisk(r *run, rng *rand.Rand) (fault, string, error) {
	groups := replicaGroups(r)
	all := shuffled(r, rng)
	var victims []*node
	switch k := rng.IntN(4); {
	case k <= 1:
		victims = []*node{randomLeader(r, rng)}
	case k == 2:
		victims = all[:1]
	default:
		victims = all[:len(all)/2+1]
	}
	var running []*node
	for _, nd := range victims {
		if nd.running() {
			running = append(running, nd)
		}
	}
	moved := leadOnto(r, rng, groups, running)
	f := diskFillFault{}
	for _, nd := range running {
		f.nodes = append(f.nodes, nd)
		if err := fillDir(nd.dataDir); err != nil {
			return f, "", fmt.Errorf("filling n%d's disk: %w", nd.id, err)
		}
	}
	return f, "full disk " + names(f.nodes) + "; " + moved, nil
}

// fillDir writes the filler file in dir until its file system has no
// space left.
func fillDir(dir string) error {
	fh, err := os.OpenFile(filepath.Join(dir, fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer fh.Close()
	for chunk := 1 << 20; chunk >= 4096; chunk /= 4 {
		buf := make([]byte, chunk)
		for i := 0; i < 1<<16; i++ {
			if _, err := fh.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					return err
				}
				break
			}
		}
	}
	return nil
}
