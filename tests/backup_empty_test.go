package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestBackupEmptyRanges: a range part that holds no key at the backup's
// timestamp writes no file and has no place in the manifest (an SST holds
// at least one entry), so a backup of a span with empty ranges, an
// incremental backup with nothing changed, a backup of an empty span and
// one of a whole empty cluster all complete, verify as sound and restore.
func TestBackupEmptyRanges(t *testing.T) {
	shared := t.TempDir()
	src := newCluster(t, 1, "--backup-dir", shared)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := src.client()
	// [em-, em-4) spans four ranges; [em-, em-1) and [em-2, em-3) stay empty.
	for _, at := range []string{"em-1", "em-2", "em-3"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		for _, r := range []string{"em-1", "em-3"} {
			if err := cl.Put(ctx, []byte(fmt.Sprintf("%s-%02d", r, i)), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	span := &client.BackupOptions{Start: []byte("em-"), End: []byte("em-4")}
	full, err := cl.Backup(ctx, "full", span)
	if err != nil {
		t.Fatalf("backup of a span with empty ranges: %v", err)
	}
	if len(full.Files) != 2 || full.Entries != 40 {
		t.Fatalf("backup of a span with two empty ranges of four: %d files, %d entries; want 2 files (one per range with keys), 40 entries",
			len(full.Files), full.Entries)
	}
	for i, f := range full.Files {
		if want := fmt.Sprintf("%06d-r", i); !strings.HasPrefix(f.Name, want) || f.Entries != 20 {
			t.Fatalf("file %d: %s with %d entries; want %s* with 20", i, f.Name, f.Entries, want)
		}
	}
	wantFull := scanAt(t, cl, full.ReadTimestamp.Timestamp())

	// Nothing changed since full: an incremental backup with no file.
	incr, err := cl.Backup(ctx, "incr-none", &client.BackupOptions{Start: span.Start, End: span.End, Base: "full"})
	if err != nil {
		t.Fatalf("incremental backup with nothing changed: %v", err)
	}
	if len(incr.Files) != 0 || incr.Entries != 0 {
		t.Fatalf("incremental backup with nothing changed: %d files, %d entries; want none", len(incr.Files), incr.Entries)
	}
	// Then a change in one range only: one file.
	if err := cl.Put(ctx, []byte("em-3-05"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	incr2, err := cl.Backup(ctx, "incr-one", &client.BackupOptions{Start: span.Start, End: span.End, Base: "incr-none"})
	if err != nil {
		t.Fatalf("incremental backup: %v", err)
	}
	if len(incr2.Files) != 1 || incr2.Entries != 1 {
		t.Fatalf("incremental backup of one change: %d files, %d entries; want 1 and 1", len(incr2.Files), incr2.Entries)
	}
	wantIncr := scanAt(t, cl, incr2.ReadTimestamp.Timestamp())

	// A span with no key at all.
	none, err := cl.Backup(ctx, "empty-span", &client.BackupOptions{Start: []byte("zz-"), End: []byte("zz-9")})
	if err != nil {
		t.Fatalf("backup of an empty span: %v", err)
	}
	if len(none.Files) != 0 || none.Entries != 0 {
		t.Fatalf("backup of an empty span: %d files, %d entries; want none", len(none.Files), none.Entries)
	}

	// A fresh cluster: a backup of the whole (empty) key space, then the
	// restores.
	dst := newCluster(t, 1, "--backup-dir", shared)
	dcl := dst.client()
	whole, err := dcl.Backup(ctx, "empty-cluster", nil)
	if err != nil {
		t.Fatalf("backup of an empty cluster: %v", err)
	}
	if len(whole.Files) != 0 {
		t.Fatalf("backup of an empty cluster: %d files; want none", len(whole.Files))
	}
	for _, dir := range []string{"full", "incr-none", "incr-one", "empty-span", "empty-cluster"} {
		r, err := dcl.VerifyBackup(ctx, dir, nil)
		if err != nil || len(r.Problems) > 0 {
			t.Fatalf("verify %s: %v %v", dir, err, r)
		}
	}
	out, errOut, code := runCtl(t, dst.node(1).grpcAddr, "backup", "verify", "incr-none")
	if code != 0 {
		t.Fatalf("shalectl backup verify of an incremental backup without files: exit %d\n%s%s", code, out, errOut)
	}
	for _, dir := range []string{"empty-cluster", "empty-span"} {
		if _, err := dcl.Restore(ctx, dir, nil); err != nil {
			t.Fatalf("restore %s: %v", dir, err)
		}
		if got := scanEverything(t, dcl); len(got) != 0 {
			t.Fatalf("restoring %s, which holds nothing, wrote %d keys", dir, len(got))
		}
	}
	// incr-none restores as its base does.
	if _, err := dcl.Restore(ctx, "incr-none", nil); err != nil {
		t.Fatalf("restore of a chain ending in an incremental backup without files: %v", err)
	}
	diffKV(t, "incremental backup without files", wantFull, scanEverything(t, dcl))
	if err := dcl.DeleteRange(ctx, []byte{0}, nil); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCtl(t, dst.node(1).grpcAddr, "restore", "incr-one")
	if code != 0 {
		t.Fatalf("shalectl restore of the chain: exit %d\n%s%s", code, out, errOut)
	}
	diffKV(t, "incremental backup", wantIncr, scanEverything(t, dcl))
}
