package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestBackupRestore: a backup taken while writers run, restored into a
// fresh cluster with other ranges, holds exactly what a consistent scan of
// the source at the backup's timestamp returns, key by key; so does an
// incremental backup on top of it (with deletes), restored as a chain; a
// damaged file is reported by verify and refused by restore, which then
// writes nothing.
func TestBackupRestore(t *testing.T) {
	shared := t.TempDir()
	src := newCluster(t, 3, "--backup-dir", shared)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := src.client()
	for _, at := range []string{"bk-1", "bk-2", "bk-3"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 400; i++ {
		k := fmt.Sprintf("bk-%d-%04d", i%4, i)
		if err := cl.Put(ctx, []byte(k), []byte(fmt.Sprintf("v0-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Writers overwrite and add keys in every range during the backup.
	w := startWriter(src.client(), "bk-2-live", 4, 0, time.Minute)
	defer w.finish()
	waitFor(t, 30*time.Second, "writes under way", func() bool { return w.count() > 20 })

	ackedBefore := w.snapshot()
	full, err := cl.Backup(ctx, "full", nil)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if len(full.Files) < 4 {
		t.Fatalf("backup has %d files, want one per range (>= 4)", len(full.Files))
	}
	wantFull := scanAt(t, cl, full.ReadTimestamp.Timestamp())
	// The backup holds every write acknowledged before it began.
	for k, v := range ackedBefore {
		if wantFull[k] != v {
			t.Fatalf("key %q = %q was acknowledged before the backup began; at the backup's timestamp it reads %q", k, v, wantFull[k])
		}
	}
	for i := 0; i < 400; i++ {
		if k := fmt.Sprintf("bk-%d-%04d", i%4, i); wantFull[k] == "" {
			t.Fatalf("key %q, written before the backup began, is not in it", k)
		}
	}
	if full.Entries != uint64(len(wantFull)) {
		t.Fatalf("the backup holds %d entries; the scan at its timestamp %d", full.Entries, len(wantFull))
	}
	w.finish() // the incremental's size is then bounded

	// Deletes and overwrites, then an incremental backup on the full one.
	for i := 0; i < 400; i += 7 {
		k := fmt.Sprintf("bk-%d-%04d", i%4, i)
		if err := cl.Delete(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 400; i += 5 {
		k := fmt.Sprintf("bk-%d-%04d", i%4, i)
		if err := cl.Put(ctx, []byte(k), []byte(fmt.Sprintf("v1-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// shalectl drives the incremental one, as an operator would.
	out, errOut, code := runCtl(t, src.node(1).grpcAddr, "backup", "create", "incr", "--base", "full", "--json")
	if code != 0 {
		t.Fatalf("shalectl backup create --base: exit %d\n%s%s", code, out, errOut)
	}
	incr, err := readManifestFile(shared, "incr")
	if err != nil {
		t.Fatal(err)
	}
	if incr.Base != "full" || incr.Since == nil || incr.Entries >= full.Entries {
		t.Fatalf("incremental manifest: base %q since %v, %d entries (full: %d): want base full and fewer entries",
			incr.Base, incr.Since, incr.Entries, full.Entries)
	}
	wantIncr := scanAt(t, cl, incr.ReadTimestamp.Timestamp())

	// A damaged copy of the full backup.
	damaged := filepath.Join(shared, "damaged")
	copyDir(t, filepath.Join(shared, "full"), damaged)
	flipByte(t, filepath.Join(damaged, full.Files[1].Name))

	// A fresh 3-node cluster that sees the same backup directory, split
	// at other keys than the source.
	dst := newCluster(t, 3, "--backup-dir", shared)
	dcl := dst.client()
	if _, _, err := dcl.Split(ctx, []byte("bk-1-0200")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCtl(t, dst.node(1).grpcAddr, "backup", "verify", "damaged")
	if code == 0 || !strings.Contains(out, full.Files[1].Name) {
		t.Fatalf("verify of a damaged backup: exit %d, want 1 naming %s\n%s%s", code, full.Files[1].Name, out, errOut)
	}
	if _, err := dcl.Restore(ctx, "damaged", nil); !errors.Is(err, client.ErrBackupCorrupt) {
		t.Fatalf("restore of a damaged backup: %v, want ErrBackupCorrupt", err)
	}
	if got := scanEverything(t, dcl); len(got) != 0 {
		t.Fatalf("a refused restore wrote %d keys", len(got))
	}
	out, errOut, code = runCtl(t, dst.node(1).grpcAddr, "backup", "verify", "incr")
	if code != 0 {
		t.Fatalf("verify of a sound backup chain: exit %d\n%s%s", code, out, errOut)
	}

	if _, err := dcl.Restore(ctx, "full", nil); err != nil {
		t.Fatalf("restore: %v", err)
	}
	diffKV(t, "full backup", wantFull, scanEverything(t, dcl))
	if _, err := dcl.Restore(ctx, "full", nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a restore into a span that holds keys: %v, want a refusal", err)
	}
	if err := dcl.DeleteRange(ctx, []byte{0}, nil); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCtl(t, dst.node(1).grpcAddr, "restore", "incr")
	if code != 0 {
		t.Fatalf("shalectl restore of the chain: exit %d\n%s%s", code, out, errOut)
	}
	diffKV(t, "incremental backup", wantIncr, scanEverything(t, dcl))
}

// scanAt reads the whole key space at ts.
func scanAt(t *testing.T, cl *client.Client, ts client.Timestamp) map[string]string {
	t.Helper()
	return scanWith(t, cl, client.AtTimestamp(ts))
}

func scanEverything(t *testing.T, cl *client.Client) map[string]string {
	t.Helper()
	return scanWith(t, cl)
}

func scanWith(t *testing.T, cl *client.Client, opts ...client.ReadOption) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]string{}
	for kv, err := range cl.Scan(ctx, nil, nil, nil, opts...) {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		got[string(kv.Key)] = string(kv.Value)
	}
	return got
}

func diffKV(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	bad := 0
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			if bad++; bad <= 5 {
				t.Errorf("%s: key %q restored as %q (present %v), want %q", what, k, g, ok, v)
			}
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("%s: key %q = %q restored, absent at the backup's timestamp", what, k, v)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d keys differ (of %d wanted, %d restored)", what, bad, len(want), len(got))
	}
}

func readManifestFile(root, dir string) (*client.BackupManifest, error) {
	data, err := os.ReadFile(filepath.Join(root, dir, "MANIFEST"))
	if err != nil {
		return nil, err
	}
	sum, err := os.ReadFile(filepath.Join(root, dir, "MANIFEST.sha256"))
	if err != nil {
		return nil, err
	}
	return client.DecodeBackupManifest(dir, data, sum)
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// flipByte damages a file in its middle.
func flipByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatalf("%s is empty", path)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot returns a copy of what the writer has had acknowledged so far.
func (w *writer) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.acked))
	for k, v := range w.acked {
		out[k] = v
	}
	return out
}
