package bench

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestAppendKeyOrderIsNumericOrder(t *testing.T) {
	prev := appendKey(nil, 0, 16)
	if string(prev) != "0000000000000000" {
		t.Fatalf("key 0 = %q", prev)
	}
	for _, i := range []int64{1, 9, 10, 99, 100, 12345, 999_999_999} {
		k := appendKey(nil, i, 16)
		if len(k) != 16 {
			t.Fatalf("key %d has %d bytes, want 16", i, len(k))
		}
		if bytes.Compare(prev, k) >= 0 {
			t.Fatalf("key %q sorts at or before the previous key %q", k, prev)
		}
		prev = k
	}
}

func TestZipfKeysStayInKeySpaceAndAreSkewed(t *testing.T) {
	const keys = 1000
	z := newZipfKeys(rand.New(rand.NewPCG(1, 2)), keys)
	counts := map[int64]int{}
	for range 100_000 {
		k := z.next()
		if k < 0 || k >= keys {
			t.Fatalf("zipf key %d outside [0, %d)", k, keys)
		}
		counts[k]++
	}
	top := 0
	for _, n := range counts {
		top = max(top, n)
	}
	// Uniform would give about 100 per key; YCSB's skew gives the hottest
	// key several percent of all requests.
	if top < 2000 {
		t.Fatalf("hottest key drew %d of 100000: not skewed", top)
	}
}

func TestDirTreeNumbering(t *testing.T) {
	if got := dirCount(10, 4); got != 11110 {
		t.Fatalf("dirCount(10, 4) = %d, want 11110", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	v := dirValue(42, 100, r)
	if len(v) != 100 {
		t.Fatalf("value of %d bytes, want 100", len(v))
	}
	if ino, err := dirInode(v); err != nil || ino != 42 {
		t.Fatalf("dirInode = %d, %v; want 42", ino, err)
	}
	if _, err := dirInode([]byte{1, 2}); err == nil {
		t.Fatal("dirInode of a 2-byte value: no error")
	}
	if a, b := dirKey(nil, 1, 0), dirKey(nil, 1, 1); bytes.Compare(a, b) >= 0 {
		t.Fatalf("child keys out of order: %q, %q", a, b)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Workload: "put"}.withDefaults()
	if err := ok.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"workload", func(c *Config) { c.Workload = "nope" }, "unknown workload"},
		{"clients", func(c *Config) { c.Clients = -1 }, "--clients"},
		{"conns", func(c *Config) { c.Conns = c.Clients + 1 }, "--conns"},
		{"duration", func(c *Config) { c.Duration = -time.Second }, "--duration"},
		{"batch", func(c *Config) { c.BatchSize = 129 }, "--batch-size"},
		{"key size", func(c *Config) { c.KeySize = 4 }, "--key-size 4 cannot hold 100000 keys"},
		{"rww", func(c *Config) { c.Workload, c.Clients, c.Conns = "readwhilewriting", 1, 1 }, "at least 2 clients"},
		{"dirs", func(c *Config) { c.Workload, c.DirFanout, c.DirDepth = "dirwalk", 100, 4 }, "10 million"},
	} {
		c := ok
		tc.mod(&c)
		err := c.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	tg, err := ParseTarget("etcd://127.0.0.1:2379, 127.0.0.1:2381", nil)
	if err != nil || tg.System != "etcd" || len(tg.Endpoints) != 2 || tg.Endpoints[1] != "127.0.0.1:2381" {
		t.Fatalf("etcd target = %+v, %v", tg, err)
	}
	tg, err = ParseTarget("", []string{"a:1"})
	if err != nil || tg.System != "shale" || tg.Endpoints[0] != "a:1" {
		t.Fatalf("default target = %+v, %v", tg, err)
	}
	for _, bad := range []string{"etcd://", "redis://x:1", "shale://"} {
		if _, err := ParseTarget(bad, []string{"a:1"}); err == nil {
			t.Errorf("ParseTarget(%q): no error", bad)
		}
	}
}
