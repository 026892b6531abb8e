package rangesm_test

import (
	"testing"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/rangesm"
)

func txnCommit(at, readTS hlc.Timestamp, reads []command.TxnRead, muts ...command.Mutation) *command.Command {
	return &command.Command{Header: command.Header{Timestamp: at}, Kind: command.KindTxnCommit,
		Txn: command.TxnCommit{ReadTimestamp: readTS, Reads: reads}, Mutations: muts}
}

func point(k string) command.TxnRead { return command.TxnRead{Key: []byte(k)} }

func span(start, end string) command.TxnRead {
	return command.TxnRead{Key: []byte(start), End: []byte(end), Span: true}
}

func putM(k, v string) command.Mutation {
	return command.Mutation{Kind: command.KindPut, Key: []byte(k), Value: []byte(v)}
}

// TestTxnCommitValidatesReads: a one-range transaction commits when
// nothing it read (point keys and scanned spans) has a version above its
// read timestamp, at a version above the frontier; otherwise it fails
// with CodeReadChanged naming the key and writes nothing, leaving the
// frontier where it was.
func TestTxnCommitValidatesReads(t *testing.T) {
	s := newStore(t)
	s.propose(user, put("a", "1", ts(100, 0)))
	s.propose(user, put("m", "1", ts(200, 0)))
	s.propose(user, &command.Command{Kind: command.KindClose, Close: ts(300, 0)})

	// Read at 250: "a" and the span [b, z) (which holds m at 200) are
	// unchanged since; commits at max(T, F.Next()).
	res := s.propose(user, txnCommit(ts(280, 0), ts(250, 0), []command.TxnRead{point("a"), span("b", "z")}, putM("a", "2")))
	if res.Err() != nil || res.Version != ts(300, 1) {
		t.Fatalf("valid commit: %+v", res)
	}
	// A transaction that read "a" at 250 now finds a newer version.
	f := s.state(user).Frontier
	res = s.propose(user, txnCommit(ts(400, 0), ts(250, 0), []command.TxnRead{point("a")}, putM("x", "1")))
	if res.Code != command.CodeReadChanged || string(res.Value) != "a" {
		t.Fatalf("stale point read: %+v", res)
	}
	if s.state(user).Frontier != f {
		t.Fatal("a rejected commit moved the frontier")
	}
	if _, found, _ := rangesm.NewReader(s.db).Get([]byte("x"), hlc.MaxTimestamp); found {
		t.Fatal("a rejected commit wrote")
	}
	// A scan over [l, n) at 150 missed m (written at 200).
	res = s.propose(user, txnCommit(ts(400, 0), ts(150, 0), []command.TxnRead{span("l", "n")}, putM("x", "1")))
	if res.Code != command.CodeReadChanged || string(res.Value) != "m" {
		t.Fatalf("stale span read: %+v", res)
	}
	// An unbounded span (empty end) sees the same change; a span that
	// holds none of the changed keys commits.
	if res := s.propose(user, txnCommit(ts(400, 0), ts(150, 0), []command.TxnRead{span("c", "")}, putM("x", "1"))); res.Code != command.CodeReadChanged {
		t.Fatalf("stale unbounded span read: %+v", res)
	}
	if res := s.propose(user, txnCommit(ts(400, 0), ts(150, 0), []command.TxnRead{span("n", "")}, putM("x", "1"))); res.Err() != nil {
		t.Fatalf("span without changes: %+v", res)
	}
	// A deletion after the snapshot is a change too.
	s.propose(user, &command.Command{Header: command.Header{Timestamp: ts(500, 0)}, Kind: command.KindDelete,
		Mutations: []command.Mutation{{Kind: command.KindDelete, Key: []byte("m")}}})
	if res := s.propose(user, txnCommit(ts(600, 0), ts(450, 0), []command.TxnRead{point("m")}, putM("y", "1"))); res.Code != command.CodeReadChanged {
		t.Fatalf("read of a key deleted since: %+v", res)
	}
	// A read timestamp above the frontier: the reads were not served at
	// it here.
	if res := s.propose(user, txnCommit(ts(600, 0), ts(1e12, 0), []command.TxnRead{point("q")}, putM("y", "1"))); res.Code != command.CodeMalformed {
		t.Fatalf("read timestamp above the frontier: %+v", res)
	}
}

// TestTxnCommitSeesEarlierEntriesOfItsBatch: two transactions that read
// the same key at the same snapshot and write it, proposed back to back
// (likely applied in one engine batch): exactly one commits.
func TestTxnCommitSeesEarlierEntriesOfItsBatch(t *testing.T) {
	s := newStore(t)
	s.propose(user, put("k", "0", ts(100, 0)))
	s.propose(user, &command.Command{Kind: command.KindClose, Close: ts(150, 0)})
	results := make(chan command.Result, 2)
	for i := range 2 {
		go func() {
			results <- s.propose(user, txnCommit(ts(200, int32(i)), ts(150, 0), []command.TxnRead{point("k")}, putM("k", "1")))
		}()
	}
	a, b := <-results, <-results
	if (a.Err() == nil) == (b.Err() == nil) {
		t.Fatalf("both or neither committed: %+v, %+v", a, b)
	}
}
