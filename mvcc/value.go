package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/hlc"
)

// The value of a versioned key (docs/formats.md, "Versioned keys"):
//
//	version value := 0x01 created: timestamp(12) value   -- a live value
//	               | 0x02                                 -- a deletion
//	               | 0x03 created: timestamp(12) lease: fixed64 value
//	                                                      -- a live value attached
//	                                                         to a lease (docs/leases.md)
//
// lease is big-endian and never 0 (0 means "no lease": such values are
// written with tag 0x01).
//
// created is the version that created the key: the first version after the
// key's last deletion (or the first ever). It is stored in every live
// version, as etcd stores create_revision, because garbage collection may
// remove the version that created a key while later ones remain.
const (
	tagValue       = 0x01
	tagTombstone   = 0x02
	tagLeasedValue = 0x03
)

// leaseLen is the length of a leased value's lease field.
const leaseLen = 8

// ErrMalformedValue is wrapped by every error about a stored version value
// that cannot be decoded.
var ErrMalformedValue = errors.New("mvcc: malformed version value")

func appendLiveValue(dst []byte, created hlc.Timestamp, lease uint64, value []byte) []byte {
	if lease == 0 {
		dst = append(dst, tagValue)
		dst = created.AppendEncode(dst)
		return append(dst, value...)
	}
	dst = append(dst, tagLeasedValue)
	dst = created.AppendEncode(dst)
	dst = binary.BigEndian.AppendUint64(dst, lease)
	return append(dst, value...)
}

// liveValueLen is the stored length of a live value of valueLen bytes.
func liveValueLen(lease uint64, valueLen int) int {
	if lease == 0 {
		return 1 + hlc.EncodedLen + valueLen
	}
	return 1 + hlc.EncodedLen + leaseLen + valueLen
}

func appendTombstone(dst []byte) []byte { return append(dst, tagTombstone) }

// storedValue is a decoded version value.
type storedValue struct {
	live    bool
	created hlc.Timestamp
	lease   uint64 // 0: not attached to a lease
	value   []byte
}

// decodeValue splits a stored version value. For a tombstone, live is
// false and the rest is empty. value aliases b.
func decodeValue(b []byte) (storedValue, error) {
	if len(b) == 0 {
		return storedValue{}, fmt.Errorf("%w: empty", ErrMalformedValue)
	}
	switch b[0] {
	case tagTombstone:
		if len(b) != 1 {
			return storedValue{}, fmt.Errorf("%w: tombstone with %d trailing bytes", ErrMalformedValue, len(b)-1)
		}
		return storedValue{}, nil
	case tagValue, tagLeasedValue:
		head := 1 + hlc.EncodedLen
		if b[0] == tagLeasedValue {
			head += leaseLen
		}
		if len(b) < head {
			return storedValue{}, fmt.Errorf("%w: %d bytes is too short for a live value", ErrMalformedValue, len(b))
		}
		created, err := hlc.Decode(b[1 : 1+hlc.EncodedLen])
		if err != nil {
			return storedValue{}, fmt.Errorf("%w: created version: %v", ErrMalformedValue, err)
		}
		sv := storedValue{live: true, created: created, value: b[head:]}
		if b[0] == tagLeasedValue {
			sv.lease = binary.BigEndian.Uint64(b[1+hlc.EncodedLen : head])
			if sv.lease == 0 {
				return storedValue{}, fmt.Errorf("%w: leased value with lease 0", ErrMalformedValue)
			}
		}
		return sv, nil
	}
	return storedValue{}, fmt.Errorf("%w: unknown tag %#x", ErrMalformedValue, b[0])
}
