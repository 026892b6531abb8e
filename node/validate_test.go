package node

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rawCodec sends bytes as they are, to put malformed protobuf on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

func putOp(k, v []byte) *kvpb.Mutation {
	return &kvpb.Mutation{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: k, Value: v}}}
}

// TestBadInputIsRefusedAndTheServerKeepsServing sends every kind of bad
// request over real gRPC. Each must get the documented code (and, for a
// limit, a message and LimitExceeded detail naming it), write nothing, and
// leave the server serving.
func TestBadInputIsRefusedAndTheServerKeepsServing(t *testing.T) {
	tn := startNode(t, "", Config{})
	l := DefaultLimits()
	big := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	manyKeys := make([][]byte, l.MaxBatchOps+1)
	manyMuts := make([]*kvpb.Mutation, l.MaxBatchOps+1)
	for i := range manyKeys {
		manyKeys[i] = []byte(fmt.Sprintf("m%06d", i))
		manyMuts[i] = putOp(manyKeys[i], nil)
	}

	type call func() error
	kv := tn.kv
	cases := []struct {
		name      string
		call      call
		code      codes.Code
		limit     string   // LimitExceeded.limit, if any
		msg       string   // substring of the message
		untouched []string // keys the refused request would have written
	}{
		{"get empty key", func() error { _, err := kv.Get(ctxT(t), &kvpb.GetRequest{}); return err },
			codes.InvalidArgument, "", "key is empty", nil},
		{"put empty key", func() error { _, err := kv.Put(ctxT(t), &kvpb.PutRequest{Value: []byte("v")}); return err },
			codes.InvalidArgument, "", "key is empty", nil},
		{"put key over max", func() error {
			_, err := kv.Put(ctxT(t), &kvpb.PutRequest{Key: big(l.MaxKeySize + 1), Value: []byte("v")})
			return err
		}, codes.InvalidArgument, "max_key_size", "over the limit of 8192", nil},
		{"put value over max", func() error {
			_, err := kv.Put(ctxT(t), &kvpb.PutRequest{Key: []byte("bigval"), Value: big(l.MaxValueSize + 1)})
			return err
		}, codes.InvalidArgument, "max_value_size", "over the limit of 4194304", []string{"bigval"}},
		{"batch over max ops", func() error { _, err := kv.Batch(ctxT(t), &kvpb.BatchRequest{Mutations: manyMuts}); return err },
			codes.InvalidArgument, "max_batch_ops", "10001 mutations", []string{"m000000"}},
		{"batch over max bytes", func() error {
			_, err := kv.Batch(ctxT(t), &kvpb.BatchRequest{Mutations: []*kvpb.Mutation{
				putOp([]byte("w1"), big(3<<20)), putOp([]byte("w2"), big(3<<20)), putOp([]byte("w3"), big(3<<20)),
			}})
			return err
		}, codes.InvalidArgument, "max_write_bytes", "request", []string{"w1", "w2", "w3"}},
		{"batch with an empty mutation", func() error {
			_, err := kv.Batch(ctxT(t), &kvpb.BatchRequest{Mutations: []*kvpb.Mutation{putOp([]byte("e1"), nil), {}}})
			return err
		}, codes.InvalidArgument, "", "mutations[1]: no operation set", []string{"e1"}},
		{"batch delete_range unbounded", func() error {
			_, err := kv.Batch(ctxT(t), &kvpb.BatchRequest{Mutations: []*kvpb.Mutation{
				{Op: &kvpb.Mutation_DeleteRange{DeleteRange: &kvpb.DeleteRangeOp{}}},
			}})
			return err
		}, codes.InvalidArgument, "", "refusing to delete the whole key space", nil},
		{"scan start after end", func() error {
			_, err := kv.Scan(ctxT(t), &kvpb.ScanRequest{StartKey: []byte("b"), EndKey: []byte("a")})
			return err
		}, codes.InvalidArgument, "", "is after end_key", nil},
		{"scan limit over max", func() error { _, err := kv.Scan(ctxT(t), &kvpb.ScanRequest{Limit: l.MaxScanLimit + 1}); return err },
			codes.InvalidArgument, "max_scan_limit", "limit", nil},
		{"scan max_bytes over max", func() error {
			_, err := kv.Scan(ctxT(t), &kvpb.ScanRequest{MaxBytes: l.MaxScanBytes + 1})
			return err
		}, codes.InvalidArgument, "max_scan_bytes", "max_bytes", nil},
		{"scan bound over max", func() error {
			_, err := kv.Scan(ctxT(t), &kvpb.ScanRequest{StartKey: big(l.MaxKeySize + 1)})
			return err
		}, codes.InvalidArgument, "max_key_size", "start_key", nil},
		{"delete range unbounded", func() error { _, err := kv.DeleteRange(ctxT(t), &kvpb.DeleteRangeRequest{}); return err },
			codes.InvalidArgument, "", "refusing to delete the whole key space", nil},
		{"delete range reversed", func() error {
			_, err := kv.DeleteRange(ctxT(t), &kvpb.DeleteRangeRequest{StartKey: []byte("z"), EndKey: []byte("a")})
			return err
		}, codes.InvalidArgument, "", "is after end_key", nil},
		{"cas absent with expected value", func() error {
			_, err := kv.CompareAndSwap(ctxT(t), &kvpb.CompareAndSwapRequest{Key: []byte("c1"), ExpectAbsent: true, ExpectedValue: []byte("x"), NewValue: []byte("v")})
			return err
		}, codes.InvalidArgument, "", "expected_value: must be empty", []string{"c1"}},
		{"cas delete with new value", func() error {
			_, err := kv.CompareAndSwap(ctxT(t), &kvpb.CompareAndSwapRequest{Key: []byte("c2"), ExpectAbsent: true, Delete: true, NewValue: []byte("v")})
			return err
		}, codes.InvalidArgument, "", "new_value: must be empty", nil},
		{"batch get over max keys", func() error { _, err := kv.BatchGet(ctxT(t), &kvpb.BatchGetRequest{Keys: manyKeys}); return err },
			codes.InvalidArgument, "max_batch_ops", "keys", nil},
		{"batch get empty key", func() error {
			_, err := kv.BatchGet(ctxT(t), &kvpb.BatchGetRequest{Keys: [][]byte{[]byte("ok"), {}}})
			return err
		}, codes.InvalidArgument, "", "keys[1]: key is empty", nil},
		{"unknown range", func() error {
			_, err := kv.Put(ctxT(t), &kvpb.PutRequest{Header: &kvpb.RequestHeader{RangeId: 42}, Key: []byte("r42"), Value: []byte("v")})
			return err
		}, codes.NotFound, "", "range 42 not found", []string{"r42"}},
		{"unknown read consistency", func() error {
			_, err := kv.Get(ctxT(t), &kvpb.GetRequest{Header: &kvpb.RequestHeader{ReadConsistency: 7}, Key: []byte("k")})
			return err
		}, codes.InvalidArgument, "", "unknown read consistency 7", nil},
		{"malformed protobuf", func() error {
			in, out := []byte{0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 'k'}, []byte(nil)
			return tn.cc.Invoke(ctxT(t), "/shale.kv.v1.KV/Put", &in, &out, grpc.ForceCodec(rawCodec{}))
		}, codes.Internal, "", "unmarshal", nil},
		{"message over the gRPC cap", func() error {
			_, err := kv.Put(ctxT(t), &kvpb.PutRequest{Key: []byte("huge"), Value: big(l.maxRecvMsgSize() + 1)})
			return err
		}, codes.ResourceExhausted, "", "larger than max", []string{"huge"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			st := status.Convert(err)
			if st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
				t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), c.code, c.msg)
			}
			if c.limit != "" {
				if !strings.Contains(st.Message(), c.limit) {
					t.Errorf("message %q does not name the limit %s", st.Message(), c.limit)
				}
				var le *kvpb.LimitExceeded
				for _, d := range st.Details() {
					if d, ok := d.(*kvpb.LimitExceeded); ok {
						le = d
					}
				}
				if le == nil || le.Limit != c.limit || le.Actual <= le.Max {
					t.Errorf("LimitExceeded detail = %v, want limit %s with actual > max", le, c.limit)
				}
			}
			for _, k := range c.untouched {
				if _, found := get(t, tn, k); found {
					t.Errorf("the refused request wrote %q", k)
				}
			}
			// The server keeps serving.
			put(t, tn, "alive", c.name)
			if v, found := get(t, tn, "alive"); !found || v != c.name {
				t.Fatalf("after %s: Get(alive) = %q, %v", c.name, v, found)
			}
		})
	}
}

func TestBatchGetResponseLimit(t *testing.T) {
	l := DefaultLimits()
	l.MaxValueSize = 1 << 10
	l.MaxResponseBytes = 4 << 10
	tn := startNode(t, "", Config{Limits: l})
	var keys [][]byte
	for i := 0; i < 5; i++ {
		k := fmt.Sprintf("k%d", i)
		put(t, tn, k, string(bytes.Repeat([]byte("v"), 1000)))
		keys = append(keys, []byte(k))
	}
	if _, err := tn.kv.BatchGet(ctxT(t), &kvpb.BatchGetRequest{Keys: keys[:4]}); err != nil {
		t.Fatalf("4000 bytes under a 4096-byte limit: %v", err)
	}
	_, err := tn.kv.BatchGet(ctxT(t), &kvpb.BatchGetRequest{Keys: keys})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "max_response_bytes") {
		t.Fatalf("5000 bytes over a 4096-byte limit: %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	l := DefaultLimits()
	l.MaxWriteBytes = l.MaxValueSize
	if err := l.Validate(); err == nil {
		t.Fatal("limits where a maximal Put exceeds MaxWriteBytes validated")
	}
	if _, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Limits: Limits{MaxKeySize: -1}}); err == nil {
		t.Fatal("New accepted negative limits")
	}
}
