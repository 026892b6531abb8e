package mvcc

import (
	"errors"
	"fmt"

	"github.com/shaledb/shale/hlc"
)

// The value of a versioned key (docs/formats.md, "Versioned keys"):
//
//	version value := 0x01 created: timestamp(12) value   -- a live value
//	               | 0x02                                 -- a deletion
//
// created is the version that created the key: the first version after the
// key's last deletion (or the first ever). It is stored in every live
// version, as etcd stores create_revision, because garbage collection may
// remove the version that created a key while later ones remain.
const (
	tagValue     = 0x01
	tagTombstone = 0x02
)

// ErrMalformedValue is wrapped by every error about a stored version value
// that cannot be decoded.
var ErrMalformedValue = errors.New("mvcc: malformed version value")

func appendLiveValue(dst []byte, created hlc.Timestamp, value []byte) []byte {
	dst = append(dst, tagValue)
	dst = created.AppendEncode(dst)
	return append(dst, value...)
}

func appendTombstone(dst []byte) []byte { return append(dst, tagTombstone) }

// decodeValue splits a stored version value. For a tombstone, live is
// false and value and created are empty. value aliases b.
func decodeValue(b []byte) (live bool, created hlc.Timestamp, value []byte, err error) {
	if len(b) == 0 {
		return false, hlc.Timestamp{}, nil, fmt.Errorf("%w: empty", ErrMalformedValue)
	}
	switch b[0] {
	case tagTombstone:
		if len(b) != 1 {
			return false, hlc.Timestamp{}, nil, fmt.Errorf("%w: tombstone with %d trailing bytes", ErrMalformedValue, len(b)-1)
		}
		return false, hlc.Timestamp{}, nil, nil
	case tagValue:
		if len(b) < 1+hlc.EncodedLen {
			return false, hlc.Timestamp{}, nil, fmt.Errorf("%w: %d bytes is too short for a live value", ErrMalformedValue, len(b))
		}
		created, err := hlc.Decode(b[1 : 1+hlc.EncodedLen])
		if err != nil {
			return false, hlc.Timestamp{}, nil, fmt.Errorf("%w: created version: %v", ErrMalformedValue, err)
		}
		return true, created, b[1+hlc.EncodedLen:], nil
	}
	return false, hlc.Timestamp{}, nil, fmt.Errorf("%w: unknown tag %#x", ErrMalformedValue, b[0])
}
