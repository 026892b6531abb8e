package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestPutGetDelete(t *testing.T) {
	db := openTestDB(t, nil)
	if _, err := db.Get([]byte("missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(missing) = %v, want ErrNotFound", err)
	}
	mustPut(t, db, "a", "1")
	mustPut(t, db, "empty", "")
	v, err := db.Get([]byte("a"))
	if err != nil || string(v) != "1" {
		t.Fatalf("Get(a) = %q, %v", v, err)
	}
	v, err = db.Get([]byte("empty"))
	if err != nil || v == nil || len(v) != 0 {
		t.Fatalf("Get(empty) = %#v, %v; want non-nil empty", v, err)
	}
	mustPut(t, db, "a", "2")
	if v, _ := db.Get([]byte("a")); string(v) != "2" {
		t.Fatalf("after overwrite Get(a) = %q", v)
	}
	if err := db.Delete([]byte("a"), Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get([]byte("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := db.Delete([]byte("never-existed"), NoSync); err != nil {
		t.Fatalf("Delete(missing) = %v", err)
	}
}

func TestGetValueSizes(t *testing.T) {
	db := openTestDB(t, nil)
	// Around the pooled buffer's sizes, and far past its maximum.
	for _, n := range []int{1, getBufInitial - 1, getBufInitial, getBufInitial + 1, 100 << 10, getBufMax + 1, 3 << 20} {
		k := []byte("k" + strings.Repeat("x", n%7))
		v := bytes.Repeat([]byte{byte(n)}, n)
		if err := db.Put(k, v, NoSync); err != nil {
			t.Fatal(err)
		}
		got, err := db.Get(k)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("size %d: Get = %d bytes, %v", n, len(got), err)
		}
		// AppendGet keeps the prefix, with and without spare capacity.
		for _, dst := range [][]byte{[]byte("pre:"), make([]byte, 4, 4+n)} {
			copy(dst, "pre:")
			got, err := db.AppendGet(dst, k)
			if err != nil || string(got[:4]) != "pre:" || !bytes.Equal(got[4:], v) {
				t.Fatalf("size %d: AppendGet = %d bytes, %v", n, len(got), err)
			}
		}
	}
	if got, err := db.AppendGet([]byte("x"), []byte("missing")); !errors.Is(err, ErrNotFound) || string(got) != "x" {
		t.Fatalf("AppendGet(missing) = %q, %v", got, err)
	}
}

func TestAppendGetAllocatesNothingWithRoom(t *testing.T) {
	db := openTestDB(t, nil)
	mustPut(t, db, "k", "value")
	dst := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = db.AppendGet(dst[:0], []byte("k")); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendGet allocated %.1f times per call", allocs)
	}
}

func TestWriteBatchAtomicAndOrdered(t *testing.T) {
	db := openTestDB(t, nil)
	mustPut(t, db, "b", "old")
	mustPut(t, db, "m", "in range")
	var b Batch
	b.Put([]byte("a"), []byte("1"))
	b.Put([]byte("a"), []byte("2")) // a later record wins
	b.Delete([]byte("b"))
	b.DeleteRange([]byte("l"), []byte("n"))
	b.Put([]byte("z"), []byte("26"))
	if err := db.Write(&b, Sync); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "2", "z": "26"}
	for _, k := range []string{"a", "b", "m", "z"} {
		v, err := db.Get([]byte(k))
		if w, ok := want[k]; ok {
			if err != nil || string(v) != w {
				t.Errorf("Get(%s) = %q, %v; want %q", k, v, err, w)
			}
		} else if !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) = %q, %v; want not found", k, v, err)
		}
	}
	var empty Batch
	if err := db.Write(&empty, Sync); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}

func TestWritesSurviveReopen(t *testing.T) {
	db := openTestDB(t, nil)
	for i := 0; i < 1000; i++ {
		var b Batch
		b.Put(key(i), key(i*7))
		wo := NoSync
		if i%10 == 0 {
			wo = Sync
		}
		if err := db.Write(&b, wo); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Delete(key(5), Sync); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, nil)
	for i := 0; i < 1000; i++ {
		v, err := db.Get(key(i))
		if i == 5 {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleted key back after reopen: %q %v", v, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(v, key(i*7)) {
			t.Fatalf("key %d after reopen = %q, %v", i, v, err)
		}
	}
}

func TestConcurrentWritersAndReaders(t *testing.T) {
	db := openTestDB(t, nil)
	const writers, perWriter = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if err := db.Put(key(w*perWriter+i), []byte{byte(w)}, WriteOptions{Sync: i%50 == 0}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				v, err := db.Get(key(w*perWriter + i))
				if err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
				if err == nil && (len(v) != 1 || v[0] != byte(w)) {
					errs <- errors.New("read a value that was never written")
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := 0; i < writers*perWriter; i++ {
		if _, err := db.Get(key(i)); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}

func TestCloseIsNeverACrash(t *testing.T) {
	db := openTestDB(t, nil)
	mustPut(t, db, "k", "v")
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "1 iterators and 1 snapshots") {
		t.Fatalf("Close with open iterator and snapshot = %v, want ErrBusy naming them", err)
	}
	// The DB is still open and usable.
	if !it.First() || string(it.UnsafeKey()) != "k" {
		t.Fatalf("iterator after refused Close: valid=%v err=%v", it.Valid(), it.Error())
	}
	if v, err := snap.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("snapshot Get after refused Close = %q, %v", v, err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with open snapshot = %v, want ErrBusy", err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Snapshot.Close = %v, want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Every call after Close is ErrClosed.
	checks := map[string]error{}
	_, checks["Get"] = db.Get([]byte("k"))
	checks["Put"] = db.Put([]byte("k"), nil, Sync)
	_, checks["MultiGet"] = db.MultiGet([][]byte{[]byte("k")})
	_, checks["NewIter"] = db.NewIter(nil)
	_, checks["NewSnapshot"] = db.NewSnapshot()
	_, checks["Stats"] = db.Stats()
	checks["Flush"] = db.Flush()
	checks["Close"] = db.Close()
	for op, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", op, err)
		}
	}
	if _, ok := db.Property("shale.stats"); ok {
		t.Error("Property after Close succeeded")
	}
}

func TestCloseWaitsForRunningCalls(t *testing.T) {
	db := openTestDB(t, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := db.Put(key(g*1e6+i%1000), []byte("v"), NoSync)
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Put during Close: %v", err)
					}
					return
				}
				if _, err := db.Get(key(g*1e6 + i%1000)); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("Get during Close: %v", err)
					return
				}
			}
		}(g)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
}

func TestOpenOptions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Open(dir, &Options{ErrorIfMissing: true}); err == nil {
		t.Fatal("Open with ErrorIfMissing on an empty directory succeeded")
	}
	db, err := Open(dir, &Options{WriteBufferSize: 1 << 20, BloomBitsPerKey: -1, Compression: NoCompression})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, &Options{ErrorIfExists: true}); err == nil {
		t.Fatal("Open with ErrorIfExists on an existing database succeeded")
	}
	for _, bad := range []Options{{NumLevels: MaxLevels + 1}, {MaxBackgroundJobs: -1}, {Compression: 9}, {WALRecovery: 7}} {
		if _, err := Open(dir, &bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Open(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if err := Destroy(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, &Options{ErrorIfMissing: true}); err == nil {
		t.Fatal("database still there after Destroy")
	}
}

func TestEngineDefaultsRoundTrip(t *testing.T) {
	d := EngineDefaults()
	if d.WriteBufferSize == 0 || d.BlockSize == 0 || d.NumLevels == 0 || d.ErrorIfMissing {
		t.Fatalf("implausible engine defaults: %+v", d)
	}
	if err := d.validate(); err != nil {
		t.Fatalf("engine defaults do not validate: %v", err)
	}
	db := openTestDB(t, &d)
	mustPut(t, db, "k", "v")
	if EngineVersion() == "" {
		t.Fatal("empty engine version")
	}
}

func TestOpenNonDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(file, nil)
	var ee *EngineError
	if !errors.As(err, &ee) || ee.Msg == "" {
		t.Fatalf("Open(a file) = %v, want an engine error with a message", err)
	}
}

func TestEngineErrorMatchesItsSentinelOnly(t *testing.T) {
	e := &EngineError{Op: "Get", Code: codeCorruption, Msg: "000012.log offset 77: bad checksum"}
	if !errors.Is(e, ErrCorruption) || errors.Is(e, ErrIO) || errors.Is(e, ErrNotFound) {
		t.Fatal("EngineError matches the wrong sentinels")
	}
	if got := e.Error(); got != "storage: Get: corruption: 000012.log offset 77: bad checksum" {
		t.Fatalf("Error() = %q", got)
	}
	for code := codeNotFound; code <= codeBusy; code++ {
		if code == codeBufferTooSmall {
			continue
		}
		if sentinelFor(code) == nil {
			t.Errorf("code %d has no sentinel", code)
		}
	}
}
