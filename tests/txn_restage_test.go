package tests

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// Transactions across ranges whose intents come back above their commit
// candidate C0 (docs/transactions.md, "Pushed intents: committing above
// C0"). Each test pushes the right-hand range's frontier past C0 on
// purpose (a plain write there once C0 is taken, through the client's
// testing knobs), so the intent there lands at p > C0, and checks what
// the coordinator makes of it on a real node.

// restageSetup starts a node with ranges [, m) and [m, ), puts the keys
// and returns a client whose commits across ranges call knobs.
func restageSetup(t *testing.T, knobs *client.TxnTestingKnobs) (*client.Client, string, context.Context) {
	t.Helper()
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c, err := client.Dial(ctx, []string{node.grpcAddr}, &client.Options{TxnTestingKnobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, _, err := c.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a1", "a2", "n1", "n9"} {
		if err := c.Put(ctx, []byte(k), []byte("v0")); err != nil {
			t.Fatal(err)
		}
	}
	return c, node.grpcAddr, ctx
}

// pushRight returns an AfterCandidate knob that, on the first attempt
// only, writes n9 (a fresh oracle timestamp, above C0): the range of n1
// then has its frontier above C0 when the transaction's intent arrives.
func pushRight(t *testing.T, ctx context.Context, c **client.Client, c0 *client.Timestamp) func(client.Timestamp) {
	return func(ts client.Timestamp) {
		if !c0.IsZero() {
			return
		}
		*c0 = ts
		if err := (*c).Put(ctx, []byte("n9"), []byte("push")); err != nil {
			t.Error(err)
		}
	}
}

// versionOf returns key's value and version.
func versionOf(t *testing.T, ctx context.Context, c *client.Client, key string) (string, client.Timestamp) {
	t.Helper()
	r, err := c.GetVersioned(ctx, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(r.Value), r.Version
}

// TestTxnPushedCoveredCommitsInOneRound: a transfer (it reads both keys
// it writes) whose intent is pushed above C0 commits on its first
// attempt, with no refresh, at the intent's p: both keys get that one
// version.
func TestTxnPushedCoveredCommitsInOneRound(t *testing.T) {
	var c *client.Client
	var c0 client.Timestamp
	refreshed := 0
	knobs := &client.TxnTestingKnobs{BeforeRefresh: func(_, _ client.Timestamp) { refreshed++ }}
	c, _, ctx := restageSetup(t, knobs)
	knobs.AfterCandidate = pushRight(t, ctx, &c, &c0)
	attempts := 0
	err := c.Txn(ctx, func(tx *client.Tx) error {
		attempts++
		if _, err := tx.BatchGet(ctx, [][]byte{[]byte("a2"), []byte("n1")}); err != nil {
			return err
		}
		if err := tx.Put([]byte("a2"), []byte("v1")); err != nil {
			return err
		}
		return tx.Put([]byte("n1"), []byte("v1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || refreshed != 0 {
		t.Fatalf("%d attempts and %d refreshes, want 1 and 0", attempts, refreshed)
	}
	va, ta := versionOf(t, ctx, c, "a2")
	vn, tn := versionOf(t, ctx, c, "n1")
	if va != "v1" || vn != "v1" || ta != tn || !c0.Less(tn) {
		t.Fatalf("a2 = %q at %s, n1 = %q at %s: want v1 at one version above C0 %s", va, ta, vn, tn, c0)
	}
}

// TestTxnRefreshCommitsAboveC0: a transaction that also reads a key it
// does not write (a1), its intent on n1 pushed above C0, refreshes that
// read at C = the highest p, stages again at C and commits on its first
// attempt, every write at C.
func TestTxnRefreshCommitsAboveC0(t *testing.T) {
	var c *client.Client
	var c0, refreshAt client.Timestamp
	knobs := &client.TxnTestingKnobs{BeforeRefresh: func(_, ct client.Timestamp) { refreshAt = ct }}
	c, _, ctx := restageSetup(t, knobs)
	knobs.AfterCandidate = pushRight(t, ctx, &c, &c0)
	attempts := 0
	err := c.Txn(ctx, func(tx *client.Tx) error {
		attempts++
		return readA1WriteA2N1(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || refreshAt.IsZero() || !c0.Less(refreshAt) {
		t.Fatalf("%d attempts, refreshed at %s (C0 %s): want one attempt refreshed above C0", attempts, refreshAt, c0)
	}
	va, ta := versionOf(t, ctx, c, "a2")
	vn, tn := versionOf(t, ctx, c, "n1")
	if va != "v0+" || vn != "v1" || ta != refreshAt || tn != refreshAt {
		t.Fatalf("a2 = %q at %s, n1 = %q at %s: want v0+ and v1 at C %s", va, ta, vn, tn, refreshAt)
	}
}

// readA1WriteA2N1 is the refresh tests' transaction: it reads a1, which
// it does not write (a read a refresh must cover), and n1, and writes a2
// = a1 + "+" and n1 = v1.
func readA1WriteA2N1(ctx context.Context, tx *client.Tx) error {
	v, _, err := tx.Get(ctx, []byte("a1"))
	if err != nil {
		return err
	}
	if _, _, err := tx.Get(ctx, []byte("n1")); err != nil {
		return err
	}
	if err := tx.Put([]byte("a2"), append(v, '+')); err != nil {
		return err
	}
	return tx.Put([]byte("n1"), []byte("v1"))
}

// TestTxnRefreshFailsOnAWriteAfterC0: the same transaction, but another
// transaction commits a write of a1 at a version in (C0, C] after the
// first attempt's intents went in (so its own validation did not see
// it): the refresh at C finds it and the attempt does not commit; the
// second attempt reads the new a1 and commits with it.
func TestTxnRefreshFailsOnAWriteAfterC0(t *testing.T) {
	var c *client.Client
	var c0 client.Timestamp
	var addr string
	var written client.Timestamp
	knobs := &client.TxnTestingKnobs{}
	c, addr, ctx := restageSetup(t, knobs)
	knobs.AfterCandidate = pushRight(t, ctx, &c, &c0)
	knobs.BeforeRefresh = func(tc0, ct client.Timestamp) {
		if !written.IsZero() {
			return
		}
		written = commitRawAt(t, ctx, addr, "a1", "v2", tc0)
		if !tc0.Less(written) || ct.Less(written) {
			t.Errorf("the conflicting write went in at %s, not in (C0 %s, C %s]", written, tc0, ct)
		}
	}
	attempts := 0
	err := c.Txn(ctx, func(tx *client.Tx) error {
		attempts++
		return readA1WriteA2N1(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if written.IsZero() || attempts != 2 {
		t.Fatalf("%d attempts (conflicting write at %s), want 2: the first must not commit", attempts, written)
	}
	if va, _ := versionOf(t, ctx, c, "a2"); va != "v2+" {
		t.Fatalf("a2 = %q, want v2+ (the second attempt, reading the write after C0)", va)
	}
	if v1, t1 := versionOf(t, ctx, c, "a1"); v1 != "v2" || t1 != written {
		t.Fatalf("a1 = %q at %s, want v2 at %s", v1, t1, written)
	}
}

// commitRawAt commits a one-key transaction across the wire protocol by
// hand with commit candidate c0 (a timestamp already issued, which no
// client would send): its intent goes in at the range's frontier, just
// above the other transaction's intents; it returns the commit version.
func commitRawAt(t *testing.T, ctx context.Context, addr, key, value string, c0 client.Timestamp) client.Timestamp {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	txn := kvpb.NewTxnClient(cc)
	id := make([]byte, 16)
	rand.Read(id)
	k := []byte(key)
	w, err := txn.Write(ctx, &kvpb.TxnWriteRequest{Header: &kvpb.RequestHeader{}, TxnId: id, RecordKey: k,
		Mutations:       []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: k, Value: []byte(value)}}}},
		CommitTimestamp: &kvpb.Timestamp{WallNanos: c0.WallTime, Logical: uint32(c0.Logical)}})
	if err != nil || !w.GetWritten() {
		t.Fatalf("raw Write of %s: %v %v", key, w, err)
	}
	for _, op := range []kvpb.TxnRecordOp{kvpb.TxnRecordOp_TXN_RECORD_STAGE, kvpb.TxnRecordOp_TXN_RECORD_COMMIT} {
		rec, err := txn.Record(ctx, &kvpb.TxnRecordRequest{Header: &kvpb.RequestHeader{}, TxnId: id, Op: op, RecordKey: k,
			Timestamp: w.GetVersion(), HeartbeatUnixNanos: time.Now().UnixNano(), Keys: [][]byte{k}})
		if err != nil {
			t.Fatalf("raw record %v: %v", op, err)
		}
		if op == kvpb.TxnRecordOp_TXN_RECORD_COMMIT && rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_COMMITTED {
			t.Fatalf("raw commit: %v", rec)
		}
	}
	if _, err := txn.Resolve(ctx, &kvpb.TxnResolveRequest{Header: &kvpb.RequestHeader{}, TxnId: id, Committed: true,
		CommitTimestamp: w.GetVersion(), Keys: [][]byte{k}}); err != nil {
		t.Fatal(err)
	}
	p := w.GetVersion()
	return client.Timestamp{WallTime: p.GetWallNanos(), Logical: int32(p.GetLogical())}
}
