package node

import (
	"bytes"
	"fmt"
)

// A backup file is an SST made by the engine's SST writer. Each entry's
// key is a user key; its value is a one-byte tag and the payload:
//
//	value := 0x01 user_value     a put: the key's value as of the backup
//	       | 0x02                a deletion (incremental backups only)
//
// docs/formats.md ("Backups") gives the whole layout. DO NOT CHANGE the
// tags: backups outlive the binaries that wrote them.
const (
	backupTagPut    byte = 0x01
	backupTagDelete byte = 0x02
)

// encodeBackupValue returns the value of a backup entry.
func encodeBackupValue(dst, value []byte, deleted bool) []byte {
	if deleted {
		return append(dst[:0], backupTagDelete)
	}
	return append(append(dst[:0], backupTagPut), value...)
}

// decodeBackupValue splits a backup entry's value.
func decodeBackupValue(v []byte) (value []byte, deleted bool, err error) {
	switch {
	case len(v) == 1 && v[0] == backupTagDelete:
		return nil, true, nil
	case len(v) >= 1 && v[0] == backupTagPut:
		return bytes.Clone(v[1:]), false, nil
	}
	if len(v) == 0 {
		return nil, false, fmt.Errorf("backup entry has an empty value (no tag)")
	}
	return nil, false, fmt.Errorf("backup entry has unknown tag 0x%02x", v[0])
}
