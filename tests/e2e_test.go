package tests

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestBadInputOverTheWire sends bad requests through the client to the real
// binary: each is refused with ErrInvalidArgument naming its limit, nothing
// is written, and the node keeps serving.
func TestBadInputOverTheWire(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// No client-side size checks: the node's own answers are under test.
	// A long attempt timeout: on a loaded machine sending a 20 MiB message
	// can outlast the default 1 s attempt, and a write attempt that timed
	// out makes the request's outcome unknown (ErrAmbiguous) whatever the
	// next attempt hears; the answer's class, not its speed, is under test.
	c, err := client.Dial(ctx, []string{node.grpcAddr}, &client.Options{MaxKeySize: -1, MaxValueSize: -1,
		AttemptTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cases := []struct {
		name  string
		call  func() error
		limit string
	}{
		{"empty key", func() error { return c.Put(ctx, nil, []byte("v")) }, ""},
		{"key over 8 KiB", func() error { return c.Put(ctx, bytes.Repeat([]byte("k"), 8<<10+1), nil) }, "max_key_size"},
		{"value over 4 MiB", func() error { return c.Put(ctx, []byte("bad"), make([]byte, 4<<20+1)) }, "max_value_size"},
		// Over gRPC's message cap (about twice max_write_bytes): refused
		// before the node reads it, yet InvalidArgument naming the cap,
		// never ResourceExhausted (a full disk).
		{"value over the gRPC message cap", func() error { return c.Put(ctx, []byte("bad"), make([]byte, 20<<20)) }, "grpc_max_message_size"},
		{"batch over the gRPC message cap", func() error {
			return c.Batch(ctx, client.PutOp([]byte("bad"), make([]byte, 4<<20)), client.PutOp([]byte("bad2"), make([]byte, 4<<20)),
				client.PutOp([]byte("bad3"), make([]byte, 4<<20)), client.PutOp([]byte("bad4"), make([]byte, 4<<20)),
				client.PutOp([]byte("bad5"), make([]byte, 4<<20)))
		}, "grpc_max_message_size"},
		{"scan start after end", func() error {
			for _, err := range c.Scan(ctx, []byte("z"), []byte("a"), nil) {
				return err
			}
			return nil
		}, ""},
		{"batch over the write limit", func() error {
			return c.Batch(ctx, client.PutOp([]byte("bad"), make([]byte, 3<<20)), client.PutOp([]byte("bad2"), make([]byte, 3<<20)),
				client.PutOp([]byte("bad3"), make([]byte, 3<<20)))
		}, "max_write_bytes"},
		{"unbounded range delete", func() error { return c.DeleteRange(ctx, nil, nil) }, ""},
	}
	for _, tc := range cases {
		err := tc.call()
		if !errors.Is(err, client.ErrInvalidArgument) || errors.Is(err, client.ErrResourceExhausted) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			continue
		}
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Endpoint != node.grpcAddr {
			t.Errorf("%s: error does not name the endpoint: %v", tc.name, err)
		}
		if tc.limit != "" && (ce.Limit == nil || ce.Limit.Limit != tc.limit || !strings.Contains(err.Error(), tc.limit)) {
			t.Errorf("%s: %v does not name limit %s", tc.name, err, tc.limit)
		}
		if err := c.Put(ctx, []byte("alive"), []byte(tc.name)); err != nil {
			t.Fatalf("after %s the node does not serve: %v", tc.name, err)
		}
	}
	for _, k := range []string{"bad", "bad2", "bad3", "bad4", "bad5"} {
		if _, found, err := c.Get(ctx, []byte(k)); err != nil || found {
			t.Errorf("refused write of %s is visible (found %v, err %v)", k, found, err)
		}
	}
	node.stop()
}

// TestClientRefusesOversizedBeforeSending: with its default limits (the
// nodes' defaults) the client refuses an oversized key or value itself,
// with ErrInvalidArgument naming the limit, without a round trip.
func TestClientRefusesOversizedBeforeSending(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := make([]byte, 20<<20)
	cases := []struct {
		name  string
		call  func() error
		limit string
	}{
		{"Put key", func() error { return c.Put(ctx, bytes.Repeat([]byte("k"), 8<<10+1), nil) }, "max_key_size"},
		{"Get key", func() error { _, _, err := c.Get(ctx, bytes.Repeat([]byte("k"), 8<<10+1)); return err }, "max_key_size"},
		{"Put value", func() error { return c.Put(ctx, []byte("bad"), big) }, "max_value_size"},
		{"Batch value", func() error { return c.Batch(ctx, client.PutOp([]byte("a"), nil), client.PutOp([]byte("bad"), big)) }, "max_value_size"},
		{"WriteMany value", func() error { return c.WriteMany(ctx, client.PutOp([]byte("bad"), big)) }, "max_value_size"},
		{"CompareAndSwap value", func() error {
			_, err := c.CompareAndSwap(ctx, []byte("bad"), client.IfAbsent(), big)
			return err
		}, "max_value_size"},
	}
	for _, tc := range cases {
		err := tc.call()
		var ce *client.Error
		if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &ce) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			continue
		}
		if ce.Limit == nil || ce.Limit.Limit != tc.limit || !strings.Contains(err.Error(), tc.limit) {
			t.Errorf("%s: %v does not name limit %s", tc.name, err, tc.limit)
		}
		if ce.Endpoint != "" || !strings.Contains(err.Error(), "not sent") {
			t.Errorf("%s: %v was sent to a node, not refused by the client", tc.name, err)
		}
	}
	if _, found, err := c.Get(ctx, []byte("bad")); err != nil || found {
		t.Errorf("a refused write is visible (found %v, err %v)", found, err)
	}
	node.stop()
}

// TestClientAgainstRealNode covers the client's operations and its error
// classes against the real binary, including a stopped node.
func TestClientAgainstRealNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n")
	node := startNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, &client.Options{RequestTimeout: 2 * time.Second, ScanPageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if err := c.Batch(ctx, client.PutOp([]byte("a"), []byte("1")), client.PutOp([]byte("b"), []byte("2")),
		client.PutOp([]byte("c"), []byte("3")), client.PutOp([]byte("d"), nil), client.PutOp([]byte("e"), []byte("5")),
		client.PutOp([]byte("f"), []byte("6")), client.PutOp([]byte("g"), []byte("7"))); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for kv, err := range c.Scan(ctx, []byte("b"), []byte("g"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(kv.Key)+"="+string(kv.Value))
	}
	if got := strings.Join(keys, ","); got != "b=2,c=3,d=,e=5,f=6" {
		t.Fatalf("paged scan = %s", got)
	}
	keys = keys[:0]
	for kv, err := range c.Scan(ctx, nil, nil, &client.ScanOptions{Reverse: true, Limit: 4, KeysOnly: true}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(kv.Key)+"="+string(kv.Value))
	}
	if got := strings.Join(keys, ","); got != "g=,f=,e=,d=" {
		t.Fatalf("reverse keys-only scan with limit = %s", got)
	}
	// Breaking out of the loop stops the scan.
	n := 0
	for range c.Scan(ctx, nil, nil, nil) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("break did not stop the scan: %d", n)
	}
	res, err := c.BatchGet(ctx, [][]byte{[]byte("a"), []byte("zz"), []byte("d")})
	if err != nil || !res[0].Found || string(res[0].Value) != "1" || res[1].Found || !res[2].Found || res[2].Value == nil {
		t.Fatalf("BatchGet = %+v, %v", res, err)
	}
	r, err := c.CompareAndSwap(ctx, []byte("a"), client.IfValue([]byte("1")), []byte("one"))
	if err != nil || !r.Succeeded {
		t.Fatalf("CompareAndSwap = %+v, %v", r, err)
	}
	r, err = c.CompareAndSwap(ctx, []byte("a"), client.IfAbsent(), []byte("x"))
	if err != nil || r.Succeeded || string(r.Current) != "one" {
		t.Fatalf("CompareAndSwap(IfAbsent) on an existing key = %+v, %v", r, err)
	}
	if r, err := c.CompareAndDelete(ctx, []byte("a"), client.IfValue([]byte("one"))); err != nil || !r.Succeeded {
		t.Fatalf("CompareAndDelete = %+v, %v", r, err)
	}
	if err := c.DeleteRange(ctx, []byte("b"), []byte("e")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, []byte("g")); err != nil {
		t.Fatal(err)
	}
	keys = keys[:0]
	for kv, err := range c.Scan(ctx, nil, nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(kv.Key))
	}
	if got := strings.Join(keys, ","); got != "e,f" {
		t.Fatalf("after deletes: %s", got)
	}
	st, err := c.Status(ctx)
	if err != nil || st.GetNode().GetAddress() != node.grpcAddr {
		t.Fatalf("Status = %v, %v", st, err)
	}

	// A stopped node: a write is not ambiguous, because it was never sent.
	// The client retries until the deadline, so give it a short one.
	node.stop()
	shortCtx, shortCancel := context.WithTimeout(ctx, 2*time.Second)
	defer shortCancel()
	err = c.Put(shortCtx, []byte("k"), []byte("v"))
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrAmbiguous) || !strings.Contains(err.Error(), node.grpcAddr) {
		t.Fatalf("Put to a stopped node = %v, want ErrUnavailable naming %s", err, node.grpcAddr)
	}
	if _, _, err := c.Get(shortCtx, []byte("k")); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("Get from a stopped node = %v", err)
	}
	// The client reconnects once the node is back.
	node.restart()
	if v, found, err := c.Get(ctx, []byte("e")); err != nil || !found || string(v) != "5" {
		t.Fatalf("Get after restart = %q %v %v", v, found, err)
	}
	// Dial names every endpoint it could not reach.
	start := time.Now()
	_, err = client.Dial(context.Background(), []string{"127.0.0.1:1", "127.0.0.1:2"}, &client.Options{DialTimeout: 2 * time.Second})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Dial with DialTimeout 2s took %v", took)
	}
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Fatalf("Dial to nothing = %v", err)
	}
}
