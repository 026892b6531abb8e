package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// The reference the package is compared with: every version of every key
// in a Go map, never garbage collected, and reads derived from the whole
// history (created = the first live version after the last deletion).

type modelVersion struct {
	ts    hlc.Timestamp
	live  bool
	value string
}

type model struct {
	keys map[string][]modelVersion // ascending by ts
}

func (m *model) newest(key string) (modelVersion, bool) {
	vs := m.keys[key]
	if len(vs) == 0 {
		return modelVersion{}, false
	}
	return vs[len(vs)-1], true
}

// write adds or replaces (same ts) a version.
func (m *model) write(key string, v modelVersion) {
	vs := m.keys[key]
	if n := len(vs); n > 0 && vs[n-1].ts == v.ts {
		vs[n-1] = v
	} else {
		vs = append(vs, v)
	}
	m.keys[key] = vs
}

func (m *model) get(key string, ts hlc.Timestamp) (KeyValue, bool) {
	var (
		kv    KeyValue
		found bool
	)
	for _, v := range m.keys[key] {
		if ts.Less(v.ts) {
			break
		}
		if !v.live {
			found = false
			continue
		}
		if !found {
			kv.Created = v.ts
		}
		found = true
		kv.Key, kv.Value, kv.Version = []byte(key), []byte(v.value), v.ts
	}
	return kv, found
}

func (m *model) scan(start, end []byte, ts hlc.Timestamp) []KeyValue {
	var keys []string
	for k := range m.keys {
		if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []KeyValue
	for _, k := range keys {
		if kv, ok := m.get(k, ts); ok {
			out = append(out, kv)
		}
	}
	return out
}

// retained is the number of versions of key GC at threshold keeps.
func (m *model) retained(key string, threshold hlc.Timestamp) int {
	n := 0
	vs := m.keys[key]
	for i := len(vs) - 1; i >= 0; i-- {
		if threshold.Less(vs[i].ts) {
			n++
			continue
		}
		if vs[i].live {
			n++
		}
		break
	}
	return n
}

// collectible is the lowest threshold at which GC would collect one of
// key's versions that GC at threshold keeps (zero: none), and whether
// GC finds it exactly (it steps through fewer than gcStepsAbove of the
// key's versions above threshold).
func (m *model) collectible(key string, threshold hlc.Timestamp) (hlc.Timestamp, bool) {
	vs := m.keys[key]
	var min hlc.Timestamp
	note := func(ts hlc.Timestamp) {
		if min.IsZero() || ts.Less(min) {
			min = ts
		}
	}
	above := 0
	for i := len(vs) - 1; i >= 0; i-- {
		kept := threshold.Less(vs[i].ts)
		if kept {
			above++
		}
		if !kept && !vs[i].live {
			break // a deletion at or below threshold: collected
		}
		switch {
		case !vs[i].live:
			note(vs[i].ts)
		case i+1 < len(vs):
			note(vs[i+1].ts)
		}
		if !kept {
			break
		}
	}
	return min, above < gcStepsAbove
}

var modelKeys = []string{"", "\x00", "\x00\x00", "\x00\xff", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "b\x00", "c", "\xff"}

func sameKVs(a, b []KeyValue) bool {
	return slices.EqualFunc(a, b, func(x, y KeyValue) bool {
		return bytes.Equal(x.Key, y.Key) && bytes.Equal(x.Value, y.Value) && x.Version == y.Version && x.Created == y.Created
	})
}

func fmtKVs(kvs []KeyValue) string {
	var b bytes.Buffer
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%q=%q@%s(c%s) ", kv.Key, kv.Value, kv.Version, kv.Created)
	}
	return b.String()
}

// testKeyspace is where the tests keep versioned keys: under the user-key
// prefix, with the engine filtering on the unversioned key.
var testKeyspace = Keyspace{Prefix: []byte{0x03}}

func openModelDB(t *testing.T) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), &storage.Options{
		SplitVersionSuffix: true,
		VersionedKeyPrefix: testKeyspace.Prefix,
		WriteBufferSize:    64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	// Keys of other kinds around the keyspace, which reads must not see.
	for _, k := range []string{"\x02zzz", "\x04"} {
		if err := db.Put([]byte(k), []byte("not mvcc"), storage.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

type fakePhysical struct{ now int64 }

func (f *fakePhysical) Now() time.Time { return time.Unix(0, f.now) }

// TestRandomizedAgainstModel applies random writes (puts, deletes, range
// deletes, some below existing versions), GC at rising thresholds, flushes
// and compactions, and after each step compares Get and paged Scan at
// random timestamps at or above the GC threshold, through the DB and
// through snapshots, with the model; after each GC it checks that exactly
// the versions no such read can see were removed.
// iterOnly hides a Reader's versioned point reads (storage's
// SeekPrefixGE), so that Get and GetMany seek iterators instead.
type iterOnly struct{ Reader }

func TestRandomizedAgainstModel(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 2
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, uint64(seed)) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	db := openModelDB(t)
	ks := testKeyspace
	phys := &fakePhysical{now: 1_000_000}
	clock := hlc.NewClock(phys, time.Second)
	m := &model{keys: map[string][]modelVersion{}}
	var (
		threshold hlc.Timestamp
		issued    []hlc.Timestamp // every timestamp drawn, for reads and stale writes
		stats     Stats           // the sum of every applied delta
	)
	randKey := func() string { return modelKeys[rng.IntN(len(modelKeys))] }
	randSpan := func() (start, end []byte) {
		if rng.IntN(4) > 0 {
			start = []byte(randKey())
		}
		if rng.IntN(4) > 0 {
			end = []byte(randKey())
		}
		if start != nil && end != nil && bytes.Compare(start, end) > 0 {
			start, end = end, start
		}
		return start, end
	}
	writeTS := func() hlc.Timestamp {
		if len(issued) > 0 && rng.IntN(8) == 0 {
			// Likely too old. Never at or below the GC threshold: the
			// state machine refuses those before they reach mvcc (the
			// closed timestamp is above the threshold).
			if old := issued[rng.IntN(len(issued))]; threshold.Less(old) {
				return old
			}
		}
		phys.now += rng.Int64N(3) // 0: a logical tick
		ts := clock.Now()
		issued = append(issued, ts)
		return ts
	}
	readTS := func() hlc.Timestamp {
		switch {
		case len(issued) == 0 || rng.IntN(10) == 0:
			return hlc.MaxTimestamp
		case rng.IntN(4) == 0:
			return issued[rng.IntN(len(issued))].Next() // between versions
		}
		return issued[rng.IntN(len(issued))]
	}

	for step := 0; step < 400; step++ {
		switch op := rng.IntN(10); {
		case op < 6:
			modelWriteBatch(t, step, rng, db, ks, m, writeTS(), randKey, randSpan, &stats)
		case op == 6:
			if len(issued) == 0 {
				continue
			}
			next := issued[rng.IntN(len(issued))]
			if next.Less(threshold) {
				continue
			}
			threshold = next
			modelGC(t, step, rng, db, ks, m, threshold, &stats)
		case op == 7:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case op == 8 && rng.IntN(4) == 0:
			if err := db.CompactRange(nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		// The deltas add up to what the engine holds.
		if got, err := ks.ComputeStats(db, nil, nil); err != nil || got != stats {
			t.Fatalf("seed %d step %d: ComputeStats = %+v, %v; the deltas add up to %+v", seed, step, got, err, stats)
		}
		// Reads, at timestamps GC has not passed.
		var r Reader = db
		if rng.IntN(3) == 0 {
			snap, err := db.NewSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Close()
			r = snap
		}
		if rng.IntN(4) == 0 {
			// Read through iterators, as a Reader without versioned point
			// reads does.
			r = iterOnly{r}
		}
		for i := 0; i < 4; i++ {
			ts := readTS()
			if ts.Less(threshold) {
				if err := CheckReadTimestamp(ts, threshold); !errors.Is(err, ErrHistoryCompacted) {
					t.Fatalf("CheckReadTimestamp(%s, %s) = %v", ts, threshold, err)
				}
				continue
			}
			key := randKey()
			got, found, err := ks.Get(r, []byte(key), ts)
			if err != nil {
				t.Fatal(err)
			}
			want, wantFound := m.get(key, ts)
			if found != wantFound || (found && !sameKVs([]KeyValue{got}, []KeyValue{want})) {
				t.Fatalf("seed %d step %d: Get(%q, %s) = %s %v, model %s %v", seed, step, key, ts,
					fmtKVs([]KeyValue{got}), found, fmtKVs([]KeyValue{want}), wantFound)
			}
			many := make([][]byte, rng.IntN(5))
			for j := range many {
				many[j] = []byte(randKey())
			}
			gotKVs, gotFound, err := ks.GetMany(r, many, ts)
			if err != nil {
				t.Fatal(err)
			}
			for j, k := range many {
				want, wantFound := m.get(string(k), ts)
				if gotFound[j] != wantFound || (wantFound && !sameKVs(gotKVs[j:j+1], []KeyValue{want})) {
					t.Fatalf("seed %d step %d: GetMany(%q)[%d] at %s = %s %v, model %s %v", seed, step, many, j, ts,
						fmtKVs(gotKVs[j:j+1]), gotFound[j], fmtKVs([]KeyValue{want}), wantFound)
				}
			}
			start, end := randSpan()
			limit := rng.IntN(4)
			var all []KeyValue
			for from, pages := start, 0; ; pages++ {
				kvs, resume, err := ks.Scan(r, from, end, ts, ScanOptions{Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				if limit > 0 && len(kvs) > limit {
					t.Fatalf("Scan returned %d > limit %d", len(kvs), limit)
				}
				all = append(all, kvs...)
				if resume == nil {
					break
				}
				if pages > len(modelKeys) {
					t.Fatalf("Scan does not finish: resume %q", resume)
				}
				from = resume
			}
			if want := m.scan(start, end, ts); !sameKVs(all, want) {
				t.Fatalf("seed %d step %d: Scan(%q, %q, %s, limit %d)\n got  %s\n want %s", seed, step, start, end, ts, limit, fmtKVs(all), fmtKVs(want))
			}
		}
	}
}

// modelWriteBatch writes one batch at ts: a range deletion, or up to four
// puts and deletes of distinct keys; checks that a refusal happens exactly
// when the model says a key has a version at or above ts.
func modelWriteBatch(t *testing.T, step int, rng *rand.Rand, db *storage.DB, ks Keyspace, m *model, ts hlc.Timestamp,
	randKey func() string, randSpan func() ([]byte, []byte), stats *Stats) {
	b := storage.NewBatch(0)
	w := ks.NewWriter(db, b)
	type write struct {
		key  string
		live bool
		val  string
	}
	var writes []write
	var err error
	tooOld := false
	if rng.IntN(6) == 0 {
		start, end := randSpan()
		var n int
		n, err = w.DeleteRange(start, end, ts)
		want := 0
		for _, kv := range m.scan(start, end, hlc.MaxTimestamp) {
			if nv, _ := m.newest(string(kv.Key)); !nv.ts.Less(ts) {
				tooOld = true
			}
			writes = append(writes, write{key: string(kv.Key)})
			want++
		}
		if err == nil && n != want {
			t.Fatalf("step %d: DeleteRange(%q, %q) deleted %d, model %d", step, start, end, n, want)
		}
	} else {
		seen := map[string]bool{}
		for i := rng.IntN(4); i >= 0 && err == nil; i-- {
			k := randKey()
			if seen[k] {
				continue
			}
			seen[k] = true
			nv, ok := m.newest(k)
			if ok && !nv.ts.Less(ts) {
				tooOld = true
			}
			if rng.IntN(3) == 0 {
				var deleted bool
				deleted, err = w.Delete([]byte(k), ts)
				if err == nil && deleted != (ok && nv.live) {
					t.Fatalf("step %d: Delete(%q) deleted=%v, model live=%v", step, k, deleted, ok && nv.live)
				}
				if ok && nv.live {
					writes = append(writes, write{key: k})
				}
			} else {
				v := fmt.Sprintf("v%d.%d", step, i)
				err = w.Put([]byte(k), ts, []byte(v))
				writes = append(writes, write{key: k, live: true, val: v})
			}
			if tooOld {
				break
			}
		}
	}
	if tooOld {
		var wto *WriteTooOldError
		if !errors.As(err, &wto) {
			t.Fatalf("step %d: write at %s = %v, want a WriteTooOldError", step, ts, err)
		}
		return // the batch is discarded
	}
	if err != nil {
		t.Fatalf("step %d: write at %s: %v", step, ts, err)
	}
	if err := db.Write(b, storage.NoSync); err != nil {
		t.Fatal(err)
	}
	stats.Add(w.Delta())
	for _, wr := range writes {
		m.write(wr.key, modelVersion{ts: ts, live: wr.live, value: wr.val})
	}
}

// modelGC collects garbage at threshold in batches of random size, then
// checks every key holds exactly the versions the model says GC keeps.
func modelGC(t *testing.T, step int, rng *rand.Rand, db *storage.DB, ks Keyspace, m *model, threshold hlc.Timestamp, stats *Stats) {
	start, end := []byte(nil), []byte(nil)
	var collectible hlc.Timestamp // the lowest of the calls' Collectible
	for rounds := 0; ; rounds++ {
		b := storage.NewBatch(0)
		res, err := ks.GC(db, b, start, end, threshold, GCOptions{MaxDeletes: rng.IntN(5), MaxKeys: rng.IntN(4)})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Write(b, storage.NoSync); err != nil {
			t.Fatal(err)
		}
		if res.Delta.LiveKeys != 0 || res.Delta.LiveBytes != 0 {
			t.Fatalf("step %d: GC changed live data: %+v", step, res.Delta)
		}
		stats.Add(res.Delta)
		if c := res.Collectible; !c.IsZero() && (collectible.IsZero() || c.Less(collectible)) {
			collectible = c
		}
		if res.Resume == nil {
			break
		}
		if rounds > 10000 {
			t.Fatal("GC does not finish")
		}
		start = res.Resume
	}
	counts := versionCounts(t, db, ks)
	for _, k := range modelKeys {
		if got, want := counts[k], m.retained(k, threshold); got != want {
			dumpKey(t, db, ks, k)
			t.Logf("model: %+v", m.keys[k])
			t.Fatalf("step %d: after GC at %s, %q holds %d versions, want %d", step, threshold, k, got, want)
		}
	}
	// Collectible: exact while no key has many versions above threshold,
	// never above exact.
	var want hlc.Timestamp
	exact := true
	for _, k := range modelKeys {
		c, ok := m.collectible(k, threshold)
		exact = exact && ok
		if !c.IsZero() && (want.IsZero() || c.Less(want)) {
			want = c
		}
	}
	if exact && collectible != want || !exact && (collectible.IsZero() || want.Less(collectible)) {
		t.Fatalf("step %d: GC at %s: Collectible %s, want %s (exact %v)", step, threshold, collectible, want, exact)
	}
}

// versionCounts counts the versions of each user key in the engine.
func versionCounts(t *testing.T, db *storage.DB, ks Keyspace) map[string]int {
	lower, upper := ks.bounds(nil, nil)
	it, err := db.NewIter(&storage.IterOptions{LowerBound: lower, UpperBound: upper, KeysOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	counts := map[string]int{}
	for ok := it.First(); ok; ok = it.Next() {
		k, _, err := DecodeKey(nil, it.UnsafeKey()[len(ks.Prefix):])
		if err != nil {
			t.Fatal(err)
		}
		counts[string(k)]++
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return counts
}

// dumpKey logs every version of key in the engine, to explain a failure.
func dumpKey(t *testing.T, db *storage.DB, ks Keyspace, key string) {
	t.Helper()
	it, err := db.NewIter(&storage.IterOptions{LowerBound: ks.keyStart(nil, []byte(key)), UpperBound: ks.keyEnd(nil, []byte(key))})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		_, ts, err := DecodeKey(nil, it.UnsafeKey()[len(ks.Prefix):])
		t.Logf("engine: %s %x %v", ts, it.UnsafeValue(), err)
	}
}
