package client

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestBackupManifestRoundTrip: a manifest reads back as written, and one
// that does not match its checksum, or of an unknown format, is refused.
func TestBackupManifestRoundTrip(t *testing.T) {
	m := &BackupManifest{Format: backupManifestFormat, ClusterID: "shale-1", Created: time.Unix(1764262530, 0).UTC(),
		ReadTimestamp: BackupTimestamp{WallNanos: 1764262530123456789, Logical: 3}, Start: []byte{0, 0xff}, End: nil,
		Files: []BackupFile{{Name: "000000-r2.sst", RangeID: 2, Start: []byte("a"), End: []byte("b"), Entries: 3, SHA256: "00"}}}
	data, sum, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBackupManifest("d", data, sum)
	if err != nil {
		t.Fatal(err)
	}
	if got.ReadTimestamp != m.ReadTimestamp || !bytes.Equal(got.Start, m.Start) || len(got.Files) != 1 || got.Files[0].Name != "000000-r2.sst" {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	if ts := got.ReadTimestamp.Timestamp(); ts.WallTime != 1764262530123456789 || ts.Logical != 3 {
		t.Errorf("Timestamp() = %v", ts)
	}
	bad := bytes.Replace(data, []byte(`"entries": 3`), []byte(`"entries": 4`), 1)
	if _, err := DecodeBackupManifest("d", bad, sum); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("a changed manifest: %v, want corrupt", err)
	}
	m.Format = 9
	data, sum, _ = encodeManifest(m)
	if _, err := DecodeBackupManifest("d", data, sum); err == nil || !strings.Contains(err.Error(), "format 9") {
		t.Errorf("format 9: %v, want a refusal naming it", err)
	}
}
