package mvcc

import (
	"errors"
	"fmt"
	"slices"

	"github.com/shaledb/shale/hlc"
)

// The versioned key grammar (docs/formats.md, "Versioned keys"):
//
//	versioned key := key_enc version_suffix
//	key_enc       := (byte except 0x00 | 0x00 0xFF)* 0x00 0x01
//	version_suffix:= ^wall: uint64 big-endian, ^logical: uint32 big-endian,
//	                 suffix_len: u8 = 13
//
// key_enc escapes each 0x00 of the user key as 0x00 0xFF and ends with
// 0x00 0x01, so it preserves order and no key_enc is a prefix of another:
// comparing two versioned keys compares their user keys first. The
// version's bits are inverted so that a newer version sorts first. The last
// byte is the suffix's length counting itself, which is what the engine's
// SplitVersionSuffix option reads to filter on key_enc alone.

const (
	// SuffixLen is the length of a version suffix, and the value of a
	// versioned key's last byte.
	SuffixLen = hlc.EncodedLen + 1

	escapeByte     = 0x00
	escapedZero    = 0xFF
	terminatorByte = 0x01
)

// ErrMalformedKey is wrapped by every error about a versioned key that
// cannot be decoded.
var ErrMalformedKey = errors.New("mvcc: malformed versioned key")

// AppendKeyPrefix appends key_enc of key to dst: the bytes every version of
// key starts with, which sort after every version of smaller keys and before
// every version of larger ones.
func AppendKeyPrefix(dst, key []byte) []byte {
	dst = slices.Grow(dst, len(key)+2) // one allocation, not one per doubling
	for _, c := range key {
		if c == escapeByte {
			dst = append(dst, escapeByte, escapedZero)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, escapeByte, terminatorByte)
}

// AppendKey appends the versioned key of key at version ts to dst.
// REQUIRES: ts.Valid().
func AppendKey(dst, key []byte, ts hlc.Timestamp) []byte {
	dst = slices.Grow(dst, len(key)+2+SuffixLen)
	dst = AppendKeyPrefix(dst, key)
	return appendSuffix(dst, ts)
}

// EncodeKey returns the versioned key of key at version ts.
func EncodeKey(key []byte, ts hlc.Timestamp) []byte {
	return AppendKey(make([]byte, 0, len(key)+2+SuffixLen), key, ts)
}

func appendSuffix(dst []byte, ts hlc.Timestamp) []byte {
	w, l := uint64(ts.WallTime)^^uint64(0), uint32(ts.Logical)^^uint32(0)
	return append(dst,
		byte(w>>56), byte(w>>48), byte(w>>40), byte(w>>32),
		byte(w>>24), byte(w>>16), byte(w>>8), byte(w),
		byte(l>>24), byte(l>>16), byte(l>>8), byte(l),
		SuffixLen)
}

// SplitKey returns the length of b's key_enc (where its version suffix
// starts), or an error if b is not a versioned key.
func SplitKey(b []byte) (int, error) {
	if len(b) < 2+SuffixLen {
		return 0, fmt.Errorf("%w: %d bytes is too short", ErrMalformedKey, len(b))
	}
	if b[len(b)-1] != SuffixLen {
		return 0, fmt.Errorf("%w: suffix length byte %d, want %d", ErrMalformedKey, b[len(b)-1], SuffixLen)
	}
	n := len(b) - SuffixLen
	if b[n-2] != escapeByte || b[n-1] != terminatorByte {
		return 0, fmt.Errorf("%w: no key terminator before the version", ErrMalformedKey)
	}
	return n, nil
}

// DecodeKey returns the user key and version of versioned key b. The key is
// appended to dst (nil: a new slice), so a caller may reuse a buffer.
func DecodeKey(dst, b []byte) (key []byte, ts hlc.Timestamp, err error) {
	n, err := SplitKey(b)
	if err != nil {
		return nil, hlc.Timestamp{}, err
	}
	key, err = decodeKeyPrefix(dst, b[:n])
	if err != nil {
		return nil, hlc.Timestamp{}, err
	}
	ts = decodeSuffix(b[n:])
	if !ts.Valid() {
		return nil, hlc.Timestamp{}, fmt.Errorf("%w: version %s has a negative field", ErrMalformedKey, ts)
	}
	return key, ts, nil
}

// decodeKeyPrefix un-escapes key_enc p (terminator included) onto dst.
func decodeKeyPrefix(dst, p []byte) ([]byte, error) {
	if dst == nil {
		dst = make([]byte, 0, len(p)-2)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != escapeByte {
			dst = append(dst, c)
			continue
		}
		if i+1 >= len(p) {
			return nil, fmt.Errorf("%w: escape at the end of the key", ErrMalformedKey)
		}
		switch p[i+1] {
		case escapedZero:
			dst = append(dst, escapeByte)
			i++
		case terminatorByte:
			if i+2 != len(p) {
				return nil, fmt.Errorf("%w: key terminator at byte %d of %d", ErrMalformedKey, i, len(p))
			}
			return dst, nil
		default:
			return nil, fmt.Errorf("%w: 0x00 followed by %#x at byte %d", ErrMalformedKey, p[i+1], i)
		}
	}
	return nil, fmt.Errorf("%w: no key terminator", ErrMalformedKey)
}

// decodeSuffix reads the version of a suffix that SplitKey found.
func decodeSuffix(s []byte) hlc.Timestamp {
	w := uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
	l := uint32(s[8])<<24 | uint32(s[9])<<16 | uint32(s[10])<<8 | uint32(s[11])
	return hlc.Timestamp{WallTime: int64(^w), Logical: int32(^l)}
}

// KeyEnd returns the key_enc of the smallest user key above key (key +
// 0x00): every version of key sorts below it, and every version of any
// larger key at or above it. It is the exclusive end of key's versions.
func KeyEnd(dst, key []byte) []byte {
	dst = AppendKeyPrefix(dst, key)
	// key_enc(key + 0x00) = key_enc(key) without its terminator + 0x00 0xFF
	// + terminator.
	dst = dst[:len(dst)-1]
	return append(dst, escapedZero, escapeByte, terminatorByte)
}
