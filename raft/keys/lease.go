package keys

import (
	"encoding/binary"
	"fmt"
)

// Lease records, in the meta span (docs/leases.md, docs/formats.md):
//
//	lease      := 0x02 'l' lease_id            -> lease record (rangesm/lease.go)
//	attachment := 0x02 'k' lease_id user_key   -> empty
//
// lease_id := fixed64, big-endian. An attachment records that a put of
// user_key was allowed to attach to the lease; the lease's end deletes
// every attached key whose newest version still carries the lease.
//
// DO NOT CHANGE: stored in every engine holding meta.
const (
	metaLease      = 'l'
	metaAttachment = 'k'
)

// LeaseKey is the meta key of lease id's record.
func LeaseKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{MetaPrefix, metaLease}, id)
}

// LeaseSpan spans every lease record.
func LeaseSpan() Span {
	return Span{Start: []byte{MetaPrefix, metaLease}, End: []byte{MetaPrefix, metaLease + 1}}
}

// DecodeLeaseKey returns the lease ID of a lease record key.
func DecodeLeaseKey(key []byte) (uint64, error) {
	if len(key) != 10 || key[0] != MetaPrefix || key[1] != metaLease {
		return 0, fmt.Errorf("keys: %x is not a lease key", key)
	}
	return binary.BigEndian.Uint64(key[2:]), nil
}

// AttachmentKey is the meta key recording that userKey attached to lease
// id.
func AttachmentKey(id uint64, userKey []byte) []byte {
	k := append(make([]byte, 0, 10+len(userKey)), MetaPrefix, metaAttachment)
	k = binary.BigEndian.AppendUint64(k, id)
	return append(k, userKey...)
}

// AttachmentSpan spans every attachment of lease id.
func AttachmentSpan(id uint64) Span {
	start := binary.BigEndian.AppendUint64([]byte{MetaPrefix, metaAttachment}, id)
	if id == ^uint64(0) {
		return Span{Start: start, End: []byte{MetaPrefix, metaAttachment + 1}}
	}
	return Span{Start: start, End: binary.BigEndian.AppendUint64([]byte{MetaPrefix, metaAttachment}, id+1)}
}

// DecodeAttachmentKey returns the lease ID and user key of an attachment
// key. The user key aliases key.
func DecodeAttachmentKey(key []byte) (uint64, []byte, error) {
	if len(key) < 10 || key[0] != MetaPrefix || key[1] != metaAttachment {
		return 0, nil, fmt.Errorf("keys: %x is not a lease attachment key", key)
	}
	return binary.BigEndian.Uint64(key[2:10]), key[10:], nil
}
