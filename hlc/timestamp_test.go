package hlc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"testing/quick"
)

func TestCompareOrdersWallThenLogical(t *testing.T) {
	ordered := []Timestamp{
		{},
		{WallTime: 0, Logical: 1},
		{WallTime: 0, Logical: math.MaxInt32},
		{WallTime: 1},
		{WallTime: 1, Logical: 2},
		{WallTime: 1 << 40},
		MaxTimestamp,
	}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", a, b, got, want)
			}
			if a.Less(b) != (want < 0) || a.LessEq(b) != (want <= 0) {
				t.Errorf("Less/LessEq disagree with Compare for %s, %s", a, b)
			}
		}
	}
}

func TestNextAndPrevAreNeighbours(t *testing.T) {
	for _, ts := range []Timestamp{
		{WallTime: 5},
		{WallTime: 5, Logical: 7},
		{WallTime: 5, Logical: math.MaxInt32},
	} {
		n := ts.Next()
		if !ts.Less(n) || n.Prev() != ts {
			t.Errorf("%s.Next() = %s, whose Prev is %s", ts, n, n.Prev())
		}
	}
	if got := (Timestamp{WallTime: 5, Logical: math.MaxInt32}).Next(); got != (Timestamp{WallTime: 6}) {
		t.Errorf("Next at the logical limit = %s, want 6,0", got)
	}
}

func TestForwardBackward(t *testing.T) {
	a, b := Timestamp{WallTime: 1, Logical: 9}, Timestamp{WallTime: 2}
	if a.Forward(b) != b || b.Forward(a) != b || a.Backward(b) != a || b.Backward(a) != a {
		t.Fatal("Forward/Backward pick the wrong timestamp")
	}
}

func randomTimestamp(r *rand.Rand) Timestamp {
	// Small values often, so that equal wall times and logical ties occur.
	if r.IntN(2) == 0 {
		return Timestamp{WallTime: r.Int64N(4), Logical: r.Int32N(4)}
	}
	return Timestamp{WallTime: r.Int64(), Logical: r.Int32()}
}

// TestEncodingPreservesOrder: byte order of encodings is timestamp order,
// and Decode inverts Encode.
func TestEncodingPreservesOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		a, b := randomTimestamp(r), randomTimestamp(r)
		ea, eb := a.Encode(), b.Encode()
		if len(ea) != EncodedLen {
			t.Fatalf("Encode(%s) is %d bytes", a, len(ea))
		}
		if got, want := bytes.Compare(ea, eb), a.Compare(b); got != want {
			t.Fatalf("bytes.Compare(enc %s, enc %s) = %d, want %d", a, b, got, want)
		}
		if d, err := Decode(ea); err != nil || d != a {
			t.Fatalf("Decode(Encode(%s)) = %s, %v", a, d, err)
		}
	}
}

func TestEncodingRoundTripQuick(t *testing.T) {
	f := func(wall int64, logical int32) bool {
		ts := Timestamp{WallTime: wall & math.MaxInt64, Logical: logical & math.MaxInt32}
		d, err := Decode(ts.AppendEncode(nil))
		return err == nil && d == ts
	}
	if err := quick.Check(f, nil); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		make([]byte, EncodedLen-1),
		make([]byte, EncodedLen+1),
		append([]byte{0x80}, make([]byte, EncodedLen-1)...), // negative wall
		append(make([]byte, 8), 0xff, 0xff, 0xff, 0xff),     // negative logical
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%x) = %v, want ErrMalformed", b, err)
		}
	}
}

func TestParseAndString(t *testing.T) {
	for _, ts := range []Timestamp{{}, {WallTime: 1700000000000000000, Logical: 3}, MaxTimestamp} {
		got, err := Parse(ts.String())
		if err != nil || got != ts {
			t.Errorf("Parse(%q) = %s, %v", ts.String(), got, err)
		}
	}
	if got, err := Parse("42"); err != nil || got != (Timestamp{WallTime: 42}) {
		t.Errorf("Parse(42) = %s, %v", got, err)
	}
	for _, bad := range []string{"", ",", "x", "-1", "1,-1", "1,x", "1,2147483648", "1,2,3", "99999999999999999999"} {
		if _, err := Parse(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}
