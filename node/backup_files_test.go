package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/storage"
)

// TestBackupPath: requests reach only files inside the backup directory.
func TestBackupPath(t *testing.T) {
	root := t.TempDir()
	n := &Node{cfg: Config{BackupDir: root}}
	for _, tc := range []struct {
		dir, file string
		ok        bool
	}{
		{"nightly", "000001-r2.sst", true},
		{"a/b", "MANIFEST", true},
		{"", "x", false},
		{"/etc", "passwd", false},
		{"../up", "x", false},
		{"nightly", "../x", false},
		{"nightly", "a/b", false},
		{"nightly", ".hidden", false},
		{"nightly", "", false},
	} {
		p, err := n.backupPath("Test", tc.dir, tc.file)
		if (err == nil) != tc.ok {
			t.Errorf("backupPath(%q, %q) = %q, %v; want ok %v", tc.dir, tc.file, p, err, tc.ok)
			continue
		}
		if err == nil && !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Errorf("backupPath(%q, %q) = %q, outside %s", tc.dir, tc.file, p, root)
		}
		if err != nil && status.Code(err) != codes.InvalidArgument {
			t.Errorf("backupPath(%q, %q): %v, want InvalidArgument", tc.dir, tc.file, err)
		}
	}
	none := &Node{cfg: Config{}}
	if _, err := none.backupPath("Test", "d", "f"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--backup-dir") {
		t.Errorf("no backup directory: %v, want FailedPrecondition naming --backup-dir", err)
	}
}

// TestBackupFileRoundTrip: entries written as a backup SST read back in
// order, and a damaged file is an error, not wrong entries.
func TestBackupFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.sst")
	w, err := storage.NewSSTWriter(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	type ent struct {
		k, v    string
		deleted bool
	}
	want := []ent{{"a", "1", false}, {"b", "", true}, {"c", "", false}, {"d", strings.Repeat("x", 5000), false}}
	var buf []byte
	for _, e := range want {
		buf = encodeBackupValue(buf, []byte(e.v), e.deleted)
		if err := w.Put([]byte(e.k), buf); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	var got []ent
	n, err := readBackupFile(path, filepath.Join(dir, "scratch"), func(k, v []byte, deleted bool) error {
		got = append(got, ent{string(k), string(v), deleted})
		return nil
	})
	if err != nil || n != uint64(len(want)) {
		t.Fatalf("read back %d entries: %v", n, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "scratch")); len(ents) != 0 {
		t.Errorf("the scratch directory keeps %d entries after a read", len(ents))
	}
	if _, _, err := decodeBackupValue([]byte{0x07}); err == nil {
		t.Error("an unknown tag decoded")
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b[:len(b)-8] { // every byte but the footer's magic
		if i%97 != 0 {
			continue
		}
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x55
		badPath := filepath.Join(dir, "bad.sst")
		if err := os.WriteFile(badPath, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		var got []ent
		_, err := readBackupFile(badPath, filepath.Join(dir, "scratch"), func(k, v []byte, deleted bool) error {
			got = append(got, ent{string(k), string(v), deleted})
			return nil
		})
		if err == nil && !entriesEqual(got, want) {
			t.Fatalf("byte %d damaged: read %+v without an error", i, got)
		}
	}
}

func entriesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWriteback: the writeback of an export's file starts the kernel
// writing once a MiB has accumulated, and does nothing (without failing)
// when the file cannot be opened.
func TestWriteback(t *testing.T) {
	if wb := openWriteback(filepath.Join(t.TempDir(), "missing")); wb != nil {
		t.Fatal("a writeback for a missing file")
	}
	var none *writeback
	none.add(exportWritebackBytes) // no-op
	none.close()

	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wb := openWriteback(path)
	if wb == nil {
		t.Fatal("no writeback for a file just created")
	}
	defer wb.close()
	chunk := make([]byte, 256<<10)
	for i := range 8 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
		wb.add(len(chunk))
		if want := (i + 1) * len(chunk) % exportWritebackBytes; wb.pending != want {
			t.Fatalf("after %d KiB: %d bytes pending, want %d", (i+1)*256, wb.pending, want)
		}
	}
}
