package storage

import (
	"bytes"
	"fmt"
	"testing"
)

func TestMultiGet(t *testing.T) {
	db := openTestDB(t, nil)
	mustPut(t, db, "a", "1")
	mustPut(t, db, "empty", "")
	big := bytes.Repeat([]byte("B"), 1<<20)
	if err := db.Put([]byte("big"), big, NoSync); err != nil {
		t.Fatal(err)
	}
	keys := [][]byte{[]byte("a"), []byte("missing"), []byte("empty"), []byte("big"), []byte("a"), {}}
	vals, err := db.MultiGet(keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != len(keys) {
		t.Fatalf("%d values for %d keys", len(vals), len(keys))
	}
	if string(vals[0]) != "1" || vals[1] != nil || vals[2] == nil || len(vals[2]) != 0 ||
		!bytes.Equal(vals[3], big) || string(vals[4]) != "1" || vals[5] != nil {
		t.Fatalf("MultiGet = %q", vals)
	}
	// Values do not overlap: appending to one leaves the next intact.
	_ = append(vals[0], 'X')
	if string(vals[4]) != "1" {
		t.Fatal("appending to one value overwrote another")
	}
	if vals, err := db.MultiGet(nil); err != nil || len(vals) != 0 {
		t.Fatalf("MultiGet(nil) = %v, %v", vals, err)
	}
}

func TestMultiGetManyAgreesWithGet(t *testing.T) {
	db := openTestDB(t, nil)
	var b Batch
	for i := 0; i < 2000; i++ {
		if i%3 == 0 {
			continue
		}
		// Sizes vary so that the buffer estimate is sometimes too small.
		b.Put(key(i), bytes.Repeat([]byte{byte(i)}, (i*37)%3000))
	}
	if err := db.Write(&b, NoSync); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		keys := make([][]byte, 0, 500)
		for i := round; i < 2000; i += 4 {
			keys = append(keys, key(i))
		}
		vals, err := db.MultiGet(keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			v, err := db.Get(k)
			if err != nil {
				if vals[i] != nil {
					t.Fatalf("%s: MultiGet found %d bytes, Get says %v", k, len(vals[i]), err)
				}
				continue
			}
			if !bytes.Equal(v, vals[i]) {
				t.Fatalf("%s: MultiGet %d bytes, Get %d bytes", k, len(vals[i]), len(v))
			}
		}
	}
	if fmt.Sprint(db.multiGetAvgValue.Load()) == "0" {
		t.Fatal("the value-size estimate was never updated")
	}
}
