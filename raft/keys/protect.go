package keys

import (
	"encoding/binary"
	"fmt"
)

// Protected timestamp records, in the meta span (docs/versions.md,
// "Protected timestamps"; docs/formats.md):
//
//	protection := 0x02 'p' protection_id   -> protection record (rangesm/protect.go)
//
// protection_id := fixed64, big-endian.
//
// DO NOT CHANGE: stored in every engine holding meta.
const metaProtection = 'p'

// ProtectionKey is the meta key of protection id's record.
func ProtectionKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{MetaPrefix, metaProtection}, id)
}

// ProtectionSpan spans every protection record.
func ProtectionSpan() Span {
	return Span{Start: []byte{MetaPrefix, metaProtection}, End: []byte{MetaPrefix, metaProtection + 1}}
}

// DecodeProtectionKey returns the ID of a protection record key.
func DecodeProtectionKey(key []byte) (uint64, error) {
	if len(key) != 10 || key[0] != MetaPrefix || key[1] != metaProtection {
		return 0, fmt.Errorf("keys: %x is not a protection key", key)
	}
	return binary.BigEndian.Uint64(key[2:]), nil
}
