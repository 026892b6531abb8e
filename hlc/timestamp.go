package hlc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Timestamp is a hybrid-logical clock reading. Timestamps are ordered by
// WallTime, then Logical. The zero Timestamp is below every timestamp a
// Clock issues and stands for "no time".
type Timestamp struct {
	// WallTime is a physical time in Unix nanoseconds. Never negative in a
	// valid timestamp.
	WallTime int64
	// Logical orders timestamps that share a WallTime. Never negative in a
	// valid timestamp.
	Logical int32
}

// EncodedLen is the length of an encoded Timestamp.
const EncodedLen = 12

// MaxTimestamp is the largest valid timestamp.
var MaxTimestamp = Timestamp{WallTime: math.MaxInt64, Logical: math.MaxInt32}

// ErrMalformed is wrapped by every error about a timestamp that cannot be
// decoded or parsed.
var ErrMalformed = errors.New("hlc: malformed timestamp")

// Compare returns -1, 0 or +1 as t is below, equal to or above u.
func (t Timestamp) Compare(u Timestamp) int {
	switch {
	case t.WallTime < u.WallTime:
		return -1
	case t.WallTime > u.WallTime:
		return 1
	case t.Logical < u.Logical:
		return -1
	case t.Logical > u.Logical:
		return 1
	}
	return 0
}

// Less reports whether t is below u.
func (t Timestamp) Less(u Timestamp) bool { return t.Compare(u) < 0 }

// LessEq reports whether t is at or below u.
func (t Timestamp) LessEq(u Timestamp) bool { return t.Compare(u) <= 0 }

// IsZero reports whether t is the zero Timestamp.
func (t Timestamp) IsZero() bool { return t == Timestamp{} }

// Valid reports whether t has no negative field.
func (t Timestamp) Valid() bool { return t.WallTime >= 0 && t.Logical >= 0 }

// Next returns the smallest timestamp above t. REQUIRES: t < MaxTimestamp.
func (t Timestamp) Next() Timestamp {
	if t.Logical == math.MaxInt32 {
		return Timestamp{WallTime: t.WallTime + 1}
	}
	return Timestamp{WallTime: t.WallTime, Logical: t.Logical + 1}
}

// Prev returns the largest timestamp below t. REQUIRES: t is valid and not
// zero.
func (t Timestamp) Prev() Timestamp {
	if t.Logical == 0 {
		return Timestamp{WallTime: t.WallTime - 1, Logical: math.MaxInt32}
	}
	return Timestamp{WallTime: t.WallTime, Logical: t.Logical - 1}
}

// Forward returns the later of t and u.
func (t Timestamp) Forward(u Timestamp) Timestamp {
	if t.Less(u) {
		return u
	}
	return t
}

// Backward returns the earlier of t and u.
func (t Timestamp) Backward(u Timestamp) Timestamp {
	if u.Less(t) {
		return u
	}
	return t
}

// Add returns t with d added to its wall time and its logical part kept.
func (t Timestamp) Add(d time.Duration) Timestamp {
	return Timestamp{WallTime: t.WallTime + int64(d), Logical: t.Logical}
}

// GoTime returns t's wall time as a time.Time.
func (t Timestamp) GoTime() time.Time { return time.Unix(0, t.WallTime) }

// String formats t as "<wall nanos>,<logical>", the form Parse reads.
func (t Timestamp) String() string {
	return strconv.FormatInt(t.WallTime, 10) + "," + strconv.FormatInt(int64(t.Logical), 10)
}

// Parse reads a timestamp written by String ("1700000000000000000,3"), or a
// wall time alone ("1700000000000000000", logical 0).
func Parse(s string) (Timestamp, error) {
	wall, logical, hasLogical := strings.Cut(s, ",")
	w, err := strconv.ParseInt(wall, 10, 64)
	if err != nil || w < 0 {
		return Timestamp{}, fmt.Errorf("%w: %q: wall time must be a non-negative integer of nanoseconds", ErrMalformed, s)
	}
	t := Timestamp{WallTime: w}
	if hasLogical {
		l, err := strconv.ParseInt(logical, 10, 32)
		if err != nil || l < 0 {
			return Timestamp{}, fmt.Errorf("%w: %q: logical part must be a non-negative 32-bit integer", ErrMalformed, s)
		}
		t.Logical = int32(l)
	}
	return t, nil
}

// AppendEncode appends t's fixed-width encoding to dst and returns it:
//
//	timestamp := wall: uint64 big-endian, logical: uint32 big-endian
//
// For valid timestamps, the byte order of encodings is timestamp order.
// REQUIRES: t.Valid().
func (t Timestamp) AppendEncode(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.WallTime))
	return binary.BigEndian.AppendUint32(dst, uint32(t.Logical))
}

// Encode returns t's fixed-width encoding (AppendEncode).
func (t Timestamp) Encode() []byte { return t.AppendEncode(make([]byte, 0, EncodedLen)) }

// Decode reads a timestamp encoded by AppendEncode; b must be exactly
// EncodedLen bytes and encode a valid timestamp.
func Decode(b []byte) (Timestamp, error) {
	if len(b) != EncodedLen {
		return Timestamp{}, fmt.Errorf("%w: %d bytes, want %d", ErrMalformed, len(b), EncodedLen)
	}
	t := Timestamp{
		WallTime: int64(binary.BigEndian.Uint64(b)),
		Logical:  int32(binary.BigEndian.Uint32(b[8:])),
	}
	if !t.Valid() {
		return Timestamp{}, fmt.Errorf("%w: %x has a negative field", ErrMalformed, b)
	}
	return t, nil
}
