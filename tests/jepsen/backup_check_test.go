package jepsen

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// The backup check (docs/testing.md): during a run, with the writers and
// the nemesis going, a backup of the whole key space is taken through
// client.Backup (what `shalectl backup create` runs); after the run it is
// restored into a fresh 3-node cluster and the restored set/ keys are
// compared with the set workload's history at the backup's timestamp T.
// Each acknowledged add carries its version, so the state at T is known
// exactly: every add acknowledged at a version <= T must be there with its
// value, none acknowledged above T and none that failed may be, and an
// indeterminate add may be there or not (with its value). A backup that
// lost a key, mixed in a later write, or restored a wrong value fails the
// run; TestBackupCheckCatchesPlantedBug shows it catching an export that
// drops a key.

// backupAttemptTimeout bounds one backup attempt; a fault that stalls it
// makes the next attempt start afresh in a new directory.
const backupAttemptTimeout = 30 * time.Second

// backupTaken is the outcome of the backups tried during a run.
type backupTaken struct {
	dir      string // the one that completed, relative to the backup directory
	manifest *client.BackupManifest
	attempts int
	lastErr  error
}

// takeBackup tries backups, each in a new directory under name, until one
// completes or ctx ends.
func takeBackup(ctx context.Context, sess *session, name string) backupTaken {
	var b backupTaken
	for ctx.Err() == nil {
		b.attempts++
		dir := fmt.Sprintf("%s-%d", name, b.attempts)
		actx, cancel := context.WithTimeout(ctx, backupAttemptTimeout)
		m, err := sess.get().Backup(actx, dir, nil)
		cancel()
		if err == nil {
			b.dir, b.manifest = dir, m
			return b
		}
		b.lastErr = err
		pause(ctx, 500*time.Millisecond)
	}
	return b
}

// backupCheck is the verdict on a restored backup.
type backupCheck struct {
	expected  int      // adds acknowledged at or below the backup's timestamp
	later     int      // adds acknowledged above it
	recovered int      // indeterminate adds found in the backup
	missing   []string // adds acknowledged at or below T and absent or wrong
	extra     []string // keys in the backup that the state at T does not hold
}

func (c backupCheck) problems() []string {
	var out []string
	if len(c.missing) > 0 {
		out = append(out, fmt.Sprintf("the restored backup lacks %d of the %d adds acknowledged at or below its timestamp, e.g. %v",
			len(c.missing), c.expected, first(c.missing, 5)))
	}
	if len(c.extra) > 0 {
		out = append(out, fmt.Sprintf("the restored backup holds %d keys the state at its timestamp does not, e.g. %v",
			len(c.extra), first(c.extra, 5)))
	}
	return out
}

// checkBackup compares the set/ keys read from a restored backup taken at
// at with the set workload's adds (attempted: every add, with its outcome
// and, when acknowledged, its version).
func checkBackup(attempted map[string]setAdd, at client.Timestamp, restored map[string]string) backupCheck {
	var res backupCheck
	for k, a := range attempted {
		v, found := restored[k]
		switch {
		case a.outcome == okOutcome && a.version.LessEq(at):
			res.expected++
			if !found {
				res.missing = append(res.missing, fmt.Sprintf("%s (acknowledged at %v)", k, a.version))
			} else if v != a.value {
				res.missing = append(res.missing, fmt.Sprintf("%s=%q (added %q at %v)", k, v, a.value, a.version))
			}
		case a.outcome == okOutcome:
			res.later++
			if found {
				res.extra = append(res.extra, fmt.Sprintf("%s (acknowledged at %v, after the backup's %v)", k, a.version, at))
			}
		case a.outcome == unknownOutcome && found:
			res.recovered++
			if v != a.value {
				res.extra = append(res.extra, fmt.Sprintf("%s=%q (added %q, outcome unknown)", k, v, a.value))
			}
		case found: // failOutcome
			res.extra = append(res.extra, k+" (its add failed definitely)")
		}
	}
	for k := range restored {
		if _, ok := attempted[k]; !ok {
			res.extra = append(res.extra, k+" (never added)")
		}
	}
	sort.Strings(res.missing)
	sort.Strings(res.extra)
	return res
}

// restoreAndCheck restores backup b (from the shared directory
// backupDir) into a fresh 3-node cluster in dir, reads its set/ keys and
// checks them against the adds. The fresh cluster is gone when it returns.
func restoreAndCheck(t testing.TB, dir, backupDir string, b backupTaken, attempted map[string]setAdd) (backupCheck, error) {
	c := startCluster(t, dir, 3, false, backupFlags(backupDir)...)
	defer func() {
		for _, nd := range c.nodes(true) {
			nd.kill()
		}
	}()
	cl, err := c.dial(10 * time.Second)
	if err != nil {
		return backupCheck{}, fmt.Errorf("dialling the restore cluster: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cl.Restore(ctx, b.dir, nil); err != nil {
		return backupCheck{}, fmt.Errorf("restoring backup %s into a fresh cluster: %w", b.dir, err)
	}
	restored, err := readAll(cl, 30*time.Second)
	if err != nil {
		return backupCheck{}, fmt.Errorf("reading the restored cluster: %w", err)
	}
	return checkBackup(attempted, b.manifest.ReadTimestamp.Timestamp(), restored), nil
}

// backupFlags give every node of a cluster the shared backup directory.
func backupFlags(dir string) []string { return []string{"--backup-dir", dir} }
