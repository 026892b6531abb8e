package tests

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestTxnOneRange drives client.Txn against a real node split into two
// ranges: reads at the snapshot with reads of the transaction's own
// writes (Get, BatchGet, Scan merged with buffered puts and deletions),
// commit, a conflict retried inside Txn, concurrent read-modify-write
// increments that lose no update, read-only transactions across ranges,
// and the bad inputs of the issue, each with nothing applied.
func TestTxnOneRange(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, &client.Options{ScanPageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c", "n"} {
		if err := c.Put(ctx, []byte(k), []byte("0")); err != nil {
			t.Fatal(err)
		}
	}

	// Own writes are visible to the transaction's reads, and commit.
	err = c.Txn(ctx, func(tx *client.Tx) error {
		if err := tx.Put([]byte("a"), []byte("1")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("b")); err != nil {
			return err
		}
		if err := tx.Put([]byte("bb"), []byte("2")); err != nil {
			return err
		}
		if v, found, err := tx.Get(ctx, []byte("a")); err != nil || !found || string(v) != "1" {
			return fmt.Errorf("Get(a) after Put = %q %v %v", v, found, err)
		}
		if _, found, err := tx.Get(ctx, []byte("b")); err != nil || found {
			return fmt.Errorf("Get(b) after Delete = %v %v", found, err)
		}
		rs, err := tx.BatchGet(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
		if err != nil || !rs[0].Found || string(rs[0].Value) != "1" || rs[1].Found || !rs[2].Found || string(rs[2].Value) != "0" {
			return fmt.Errorf("BatchGet = %+v, %v", rs, err)
		}
		kvs, err := tx.Scan(ctx, []byte("a"), []byte("m"), 0)
		if err != nil {
			return err
		}
		if got := scanString(kvs); got != "a=1 bb=2 c=0" {
			return fmt.Errorf("Scan = %s", got)
		}
		if kvs, err := tx.Scan(ctx, []byte("a"), []byte("m"), 2); err != nil || scanString(kvs) != "a=1 bb=2" {
			return fmt.Errorf("Scan with limit 2 = %s, %v", scanString(kvs), err)
		}
		return tx.DeleteRange([]byte("c"), []byte("d"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := txnScanAll(t, c, "a", "m"); got != "a=1 bb=2" {
		t.Fatalf("after commit: %s", got)
	}

	// A write to a key the transaction read, between its read and its
	// commit: the commit fails, nothing applies, and Txn runs the
	// function again at a new snapshot, which commits.
	attempts := 0
	err = c.Txn(ctx, func(tx *client.Tx) error {
		attempts++
		v, _, err := tx.Get(ctx, []byte("a"))
		if err != nil {
			return err
		}
		if attempts == 1 {
			if err := c.Put(ctx, []byte("a"), []byte("10")); err != nil {
				return err
			}
		}
		n, _ := strconv.Atoi(string(v))
		return tx.Put([]byte("a"), []byte(strconv.Itoa(n+1)))
	})
	if err != nil || attempts != 2 {
		t.Fatalf("conflicting transaction: %v after %d attempts, want nil after 2", err, attempts)
	}
	if v, _, _ := c.Get(ctx, []byte("a")); string(v) != "11" {
		t.Fatalf("a = %q after the retried increment, want 11", v)
	}

	// Concurrent increments of one counter: none lost.
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := c.Txn(ctx, func(tx *client.Tx) error {
					v, _, err := tx.Get(ctx, []byte("counter"))
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(string(v))
					return tx.Put([]byte("counter"), []byte(strconv.Itoa(n+1)))
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if v, _, _ := c.Get(ctx, []byte("counter")); string(v) != strconv.Itoa(workers*each) {
		t.Fatalf("counter = %q after %d increments", v, workers*each)
	}

	// The same without the multiplexed stream (unary Txn calls).
	unary, err := client.Dial(ctx, []string{node.grpcAddr}, &client.Options{DisableMultiplexing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unary.Close()
	if err := unary.Txn(ctx, func(tx *client.Tx) error {
		v, _, err := tx.Get(ctx, []byte("counter"))
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(string(v))
		return tx.Put([]byte("counter"), []byte(strconv.Itoa(n+1)))
	}); err != nil {
		t.Fatalf("a transaction over unary calls: %v", err)
	}
	if v, _, _ := c.Get(ctx, []byte("counter")); string(v) != strconv.Itoa(workers*each+1) {
		t.Fatalf("counter = %q after the unary increment", v)
	}

	// A read-only transaction may read across ranges.
	if err := c.Txn(ctx, func(tx *client.Tx) error {
		kvs, err := tx.Scan(ctx, nil, nil, 0)
		if err != nil {
			return err
		}
		if len(kvs) < 3 {
			return fmt.Errorf("scan of everything = %s", scanString(kvs))
		}
		return nil
	}); err != nil {
		t.Fatalf("read-only transaction across ranges: %v", err)
	}

	// Bad input: clear errors, nothing applied.
	before := txnScanAll(t, c, "", "")
	check := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %v", name, err, want)
		}
		if after := txnScanAll(t, c, "", ""); after != before {
			t.Fatalf("%s applied something:\nbefore %s\nafter  %s", name, before, after)
		}
	}
	check("delete a span across ranges", c.Txn(ctx, func(tx *client.Tx) error {
		tx.Put([]byte("a"), []byte("x"))
		return tx.DeleteRange([]byte("n"), []byte("z"))
	}), client.ErrTxnSpansRanges)
	check("empty transaction", c.Txn(ctx, func(tx *client.Tx) error { return nil }), client.ErrInvalidArgument)
	errMine := errors.New("mine")
	check("function error", c.Txn(ctx, func(tx *client.Tx) error {
		tx.Put([]byte("a"), []byte("x"))
		return errMine
	}), errMine)
	check("too many writes", c.Txn(ctx, func(tx *client.Tx) error {
		for i := 0; i <= client.MaxTxnWrites; i++ {
			if err := tx.Put([]byte("w"+strconv.Itoa(i)), nil); err != nil {
				return err
			}
		}
		return nil
	}), client.ErrTxnTooLarge)
	check("too many reads", c.Txn(ctx, func(tx *client.Tx) error {
		keys := make([][]byte, client.MaxTxnReads+1)
		for i := range keys {
			keys[i] = []byte("r" + strconv.Itoa(i))
		}
		for i := 0; i < len(keys); i += 5000 {
			if _, err := tx.BatchGet(ctx, keys[i:min(i+5000, len(keys))]); err != nil {
				return err
			}
		}
		return tx.Put([]byte("a"), []byte("x"))
	}), client.ErrTxnTooLarge)
	check("too large, error ignored", c.Txn(ctx, func(tx *client.Tx) error {
		big := make([]byte, 3<<20)
		for i := range 4 {
			tx.Put([]byte("big"+strconv.Itoa(i)), big) // the fourth is refused
		}
		return nil
	}), client.ErrTxnTooLarge)
	var kept *client.Tx
	if err := c.Txn(ctx, func(tx *client.Tx) error { kept = tx; return tx.Put([]byte("a"), []byte("12")) }); err != nil {
		t.Fatal(err)
	}
	before = txnScanAll(t, c, "", "")
	_, _, err = kept.Get(ctx, []byte("a"))
	check("read after commit", err, client.ErrTxnMisuse)
	check("write after commit", kept.Put([]byte("a"), []byte("x")), client.ErrTxnMisuse)
	check("two goroutines", c.Txn(ctx, func(tx *client.Tx) error {
		// Two goroutines read through the Tx at once; each read waits on
		// the network, so their calls soon overlap.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 2000 {
				if _, _, err := tx.Get(ctx, []byte("a")); err != nil {
					return
				}
			}
		}()
		for range 2000 {
			if _, _, err := tx.Get(ctx, []byte("c")); err != nil {
				break
			}
		}
		<-done
		return tx.Put([]byte("a"), []byte("x"))
	}), client.ErrTxnMisuse)
}

func scanString(kvs []client.KeyValue) string {
	s := ""
	for i, kv := range kvs {
		if i > 0 {
			s += " "
		}
		s += string(kv.Key) + "=" + string(kv.Value)
	}
	return s
}

func txnScanAll(t *testing.T, c *client.Client, start, end string) string {
	t.Helper()
	var s, e []byte
	if start != "" {
		s = []byte(start)
	}
	if end != "" {
		e = []byte(end)
	}
	var kvs []client.KeyValue
	for kv, err := range c.Scan(context.Background(), s, e, nil) {
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, kv)
	}
	return scanString(kvs)
}

// TestTxnConditional: the one-call conditional form (client.CondTxn) and
// `shalectl txn` on a real node: comparisons on values and versions
// choose the branch, its gets answer at the snapshot after its writes,
// and bad input is refused with nothing applied.
func TestTxnConditional(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v1, err := c.PutVersioned(ctx, []byte("k"), []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CondTxn(ctx,
		[]client.Compare{client.CompareValue([]byte("k"), client.CmpEqual, []byte("1")), client.CompareVersion([]byte("new"), client.CmpEqual, client.Timestamp{})},
		[]client.TxnOp{client.OpPut([]byte("k"), []byte("2")), client.OpPut([]byte("new"), []byte("x")), client.OpGet([]byte("k"))},
		[]client.TxnOp{client.OpPut([]byte("k"), []byte("else"))})
	if err != nil || !res.Succeeded || len(res.Gets) != 1 || string(res.Gets[0].Value) != "2" {
		t.Fatalf("CondTxn whose comparisons hold = %+v, %v", res, err)
	}
	res, err = c.CondTxn(ctx,
		[]client.Compare{client.CompareVersion([]byte("k"), client.CmpEqual, v1)}, // k was rewritten since
		[]client.TxnOp{client.OpPut([]byte("k"), []byte("then"))},
		[]client.TxnOp{client.OpPut([]byte("k"), []byte("3")), client.OpGet([]byte("missing"))})
	if err != nil || res.Succeeded || len(res.Gets) != 1 || res.Gets[0].Found {
		t.Fatalf("CondTxn whose comparison fails = %+v, %v", res, err)
	}
	if v, _, _ := c.Get(ctx, []byte("k")); string(v) != "3" {
		t.Fatalf("k = %q after the else branch, want 3", v)
	}
	if _, err := c.CondTxn(ctx, nil, nil, nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("empty CondTxn: %v", err)
	}

	// shalectl txn, the same as text.
	in := "value(k) = 3\nversion(\"absent key\") = 0\n\nput k \"four 4\"\nget k\n\nput k never\n"
	out, stderr, code := runCtlInput(t, node.grpcAddr, []byte(in), "txn")
	if code != 0 || out != "SUCCESS\nfour 4\n" {
		t.Fatalf("shalectl txn: exit %d, out %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = runCtlInput(t, node.grpcAddr, []byte("value(k) < \"a\"\n\n\nget k\n"), "--json", "txn")
	if code != 0 || out != "{\"succeeded\":false,\"gets\":[{\"found\":true,\"value\":\"four 4\"}]}\n" {
		t.Fatalf("shalectl --json txn (failure branch): exit %d, out %q, stderr %q", code, out, stderr)
	}
	for _, bad := range []string{"", "value(k) ~ 1\n", "value(k = 1\n", "\nput k\n", "\nfrob k\n", "version(k) = yesterday\n"} {
		if out, stderr, code := runCtlInput(t, node.grpcAddr, []byte(bad), "txn"); code == 0 {
			t.Fatalf("shalectl txn accepted %q: %q", bad, out)
		} else if stderr == "" {
			t.Fatalf("shalectl txn refused %q without saying why", bad)
		}
	}
	if v, _, _ := c.Get(ctx, []byte("k")); string(v) != "four 4" {
		t.Fatalf("k = %q after refused input, want it unchanged", v)
	}
}
