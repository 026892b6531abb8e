package rangesm_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/rangesm"
)

var txnA, txnB = command.TxnID{0xa}, command.TxnID{0xb}

func txnWrite(id command.TxnID, at, readTS hlc.Timestamp, reads []command.TxnRead, muts ...command.Mutation) *command.Command {
	return &command.Command{Header: command.Header{Timestamp: at}, Kind: command.KindTxnWrite,
		TxnWrite: command.TxnWrite{ID: id, Record: []byte("rec")},
		Txn:      command.TxnCommit{ReadTimestamp: readTS, Reads: reads}, Mutations: muts}
}

func resolve(id command.TxnID, commit hlc.Timestamp, ks ...string) *command.Command {
	c := &command.Command{Kind: command.KindTxnResolve, TxnResolve: command.TxnResolve{ID: id, Committed: !commit.IsZero(), CommitTimestamp: commit}}
	for _, k := range ks {
		c.TxnResolve.Keys = append(c.TxnResolve.Keys, []byte(k))
	}
	return c
}

func delM(k string) command.Mutation {
	return command.Mutation{Kind: command.KindDelete, Key: []byte(k)}
}

// reader returns the serving path's Reader of range id: its lock table
// as of its published state.
func (s *store) reader(id uint64) rangesm.Reader {
	return rangesm.NewReader(s.db).WithLocks(rangesm.LocksOf(id, s.state(id)))
}

// metIntents returns the keys of the intents an IntentError names (nil,
// and a failed test, for any other outcome but success).
func metIntents(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ie *rangesm.IntentError
	if !errors.As(err, &ie) || !errors.Is(err, rangesm.ErrIntent) {
		t.Fatalf("not an intent error: %v", err)
	}
	var ks []string
	for _, in := range ie.Intents {
		ks = append(ks, string(in.Key))
	}
	return ks
}

func wantConflict(t *testing.T, what string, res command.Result, key string) {
	t.Helper()
	if res.Code != command.CodeIntentConflict || string(res.Value) != key {
		t.Fatalf("%s: %+v, want an intent conflict on %q", what, res, key)
	}
}

// TestIntentsLockTheirKeys: a TxnWrite writes intents at p = max(T,
// F.Next()), raising the frontier to p; until they are resolved, reads
// at or above p fail with an IntentError (below p they see the versions
// as they were), and every write of a locked key, every transaction that
// read one, and another transaction's intents are refused, changing
// nothing. Resolution at C >= p turns the intents into versions at C.
func TestIntentsLockTheirKeys(t *testing.T) {
	s := newStore(t)
	s.propose(user, put("a", "0", ts(100, 0)))
	s.propose(user, &command.Command{Kind: command.KindClose, Close: ts(200, 0)})

	res := s.propose(user, txnWrite(txnA, ts(150, 0), ts(150, 0), []command.TxnRead{point("a")}, putM("a", "1"), delM("b"), putM("c", "1")))
	p := res.Version
	if res.Err() != nil || p != ts(200, 1) {
		t.Fatalf("TxnWrite: %+v, want version 200,1", res)
	}
	if st := s.state(user); st.Intents != 3 || st.Frontier != p {
		t.Fatalf("after TxnWrite: %d intents, frontier %s", st.Intents, st.Frontier)
	}
	// Below p: the versions as they were; at p and above: the intents.
	if kv, found, err := s.reader(user).Get([]byte("a"), ts(200, 0)); err != nil || !found || string(kv.Value) != "0" {
		t.Fatalf("read below p: %+v %v %v", kv, found, err)
	}
	if _, _, err := s.reader(user).Get([]byte("a"), p); len(metIntents(t, err)) != 1 {
		t.Fatalf("read at p: %v", err)
	}
	if _, _, err := s.reader(user).Get([]byte("x"), p); err != nil {
		t.Fatalf("read of an unlocked key: %v", err)
	}
	if _, _, err := s.reader(user).MultiGet([][]byte{[]byte("x"), []byte("c")}, p); len(metIntents(t, err)) != 1 {
		t.Fatalf("MultiGet at p: %v", err)
	}
	page, err := s.reader(user).Scan(rangesm.ScanOptions{Start: []byte("a"), Timestamp: p, Limit: 10, MaxBytes: 1 << 20})
	if got := metIntents(t, err); len(got) != 3 {
		t.Fatalf("Scan at p: %+v %v", page, err)
	}
	// A page that stops before the intents does not meet them; one that
	// covers them does, forward and in reverse.
	s.propose(user, put("0", "z", ts(0, 0)))
	s.propose(user, put("1", "z", ts(0, 0)))
	f := s.state(user).Frontier
	if page, err := s.reader(user).Scan(rangesm.ScanOptions{Timestamp: f, Limit: 1, MaxBytes: 1 << 20}); err != nil || len(page.Kvs) != 1 || !page.More {
		t.Fatalf("a page before the intents: %+v %v", page, err)
	}
	if page, err := s.reader(user).Scan(rangesm.ScanOptions{Timestamp: f, Limit: 2, MaxBytes: 1 << 20}); err != nil || string(page.ResumeKey) != "a" {
		t.Fatalf("a page that ends at the first intent: %+v %v", page, err)
	}
	if page, err := s.reader(user).Scan(rangesm.ScanOptions{Timestamp: f, Limit: 3, MaxBytes: 1 << 20}); len(metIntents(t, err)) != 3 {
		t.Fatalf("a page holding the intents: %+v %v", page, err)
	}
	if page, err := s.reader(user).Scan(rangesm.ScanOptions{Timestamp: f, Limit: 1, MaxBytes: 1 << 20, Reverse: true, End: []byte("b")}); len(metIntents(t, err)) != 1 {
		t.Fatalf("a reverse page holding an intent: %+v %v", page, err)
	}
	// Writes of the locked keys, in every form, are refused.
	before := s.state(user)
	wantConflict(t, "Put", s.propose(user, put("a", "2", ts(0, 0))), "a")
	wantConflict(t, "DeleteRange", s.propose(user, &command.Command{Kind: command.KindDeleteRange,
		Mutations: []command.Mutation{{Kind: command.KindDeleteRange, Key: []byte("b"), Value: []byte("z")}}}), "b")
	wantConflict(t, "Batch", s.propose(user, &command.Command{Kind: command.KindBatch,
		Mutations: []command.Mutation{putM("x", "1"), putM("c", "2")}}), "c")
	wantConflict(t, "CAS", s.propose(user, &command.Command{Kind: command.KindCAS,
		CAS: command.CAS{Key: []byte("a"), Expected: []byte("0"), NewValue: []byte("9")}}), "a")
	// A one-range transaction that read a locked key (before the intent
	// came: it would have met it otherwise) may have read a value the
	// intent's transaction changes below its own version.
	wantConflict(t, "TxnCommit read", s.propose(user, txnCommit(ts(0, 0), ts(150, 0), []command.TxnRead{point("a")}, putM("x", "1"))), "a")
	wantConflict(t, "TxnCommit span", s.propose(user, txnCommit(ts(0, 0), ts(150, 0), []command.TxnRead{span("b", "")}, putM("x", "1"))), "b")
	wantConflict(t, "TxnCommit write", s.propose(user, txnCommit(ts(0, 0), ts(0, 0), nil, putM("c", "3"))), "c")
	wantConflict(t, "TxnWrite of another transaction", s.propose(user, txnWrite(txnB, ts(0, 0), ts(0, 0), nil, putM("a", "3"))), "a")
	wantConflict(t, "TxnWrite read", s.propose(user, txnWrite(txnB, ts(0, 0), ts(150, 0), []command.TxnRead{point("b")}, putM("y", "3"))), "b")
	if after := s.state(user); after != before {
		t.Fatalf("refused writes changed the state: %+v -> %+v", before, after)
	}
	if kv, _, err := rangesm.NewReader(s.db).Get([]byte("x"), hlc.MaxTimestamp); err != nil || kv.Value != nil {
		t.Fatalf("a refused batch wrote x: %+v %v", kv, err)
	}
	// A resolution below p is refused whole; one of another transaction
	// changes nothing.
	if res := s.propose(user, resolve(txnA, ts(200, 0), "a", "b")); res.Code != command.CodeMalformed {
		t.Fatalf("resolution below p: %+v", res)
	}
	if res := s.propose(user, resolve(txnB, ts(300, 0), "a", "b", "c")); res.Err() != nil || res.NodeID != 0 {
		t.Fatalf("resolution of another transaction: %+v", res)
	}
	// The transaction's own intent is replaced by a retried write.
	if res := s.propose(user, txnWrite(txnA, ts(0, 0), ts(0, 0), nil, putM("a", "1!"))); res.Err() != nil {
		t.Fatalf("own intent rewritten: %+v", res)
	}
	if st := s.state(user); st.Intents != 3 {
		t.Fatalf("a rewritten intent counted twice: %d", st.Intents)
	}
	// Committed at C: versions at C, the frontier at least C, no intents.
	c := s.state(user).Frontier.Next()
	if res := s.propose(user, resolve(txnA, c, "a", "b", "c", "a")); res.Err() != nil || res.NodeID != 3 {
		t.Fatalf("resolution: %+v", res)
	}
	if st := s.state(user); st.Intents != 0 || st.Frontier != c {
		t.Fatalf("after resolution: %+v", st)
	}
	rd := s.reader(user)
	for k, want := range map[string]string{"a": "1!", "b": "", "c": "1"} {
		kv, found, err := rd.Get([]byte(k), c)
		if err != nil || found != (want != "") || string(kv.Value) != want || (found && kv.Version != c) {
			t.Fatalf("%s at C: %+v %v %v", k, kv, found, err)
		}
	}
	if kv, _, err := rd.Get([]byte("a"), c.Prev()); err != nil || string(kv.Value) != "0" {
		t.Fatalf("a just below C: %+v %v", kv, err)
	}
	if res := s.propose(user, put("a", "2", ts(0, 0))); res.Err() != nil {
		t.Fatalf("write after resolution: %+v", res)
	}
}

// TestAbortedIntentsLeaveNoTrace: an aborted transaction's intents are
// dropped and its keys read and write as before it.
func TestAbortedIntentsLeaveNoTrace(t *testing.T) {
	s := newStore(t)
	s.propose(user, put("a", "0", ts(100, 0)))
	p := s.propose(user, txnWrite(txnA, ts(0, 0), ts(0, 0), nil, putM("a", "1"), putM("n", "1"))).Version
	if res := s.propose(user, resolve(txnA, hlc.Timestamp{}, "a", "n")); res.Err() != nil || res.NodeID != 2 {
		t.Fatalf("abort: %+v", res)
	}
	if st := s.state(user); st.Intents != 0 || st.Frontier != p {
		t.Fatalf("after the abort: %+v (p %s)", st, p)
	}
	if kv, _, err := s.reader(user).Get([]byte("a"), p); err != nil || string(kv.Value) != "0" {
		t.Fatalf("a after the abort: %+v %v", kv, err)
	}
	if _, found, err := s.reader(user).Get([]byte("n"), p); err != nil || found {
		t.Fatalf("n after the abort: %v %v", found, err)
	}
	// A late resolution of the same intents (a second resolver) is a
	// no-op.
	if res := s.propose(user, resolve(txnA, ts(9000, 0), "a", "n")); res.Err() != nil || res.NodeID != 0 {
		t.Fatalf("late commit resolution after the abort: %+v", res)
	}
	if kv, _, err := rangesm.NewReader(s.db).Get([]byte("a"), hlc.MaxTimestamp); err != nil || string(kv.Value) != "0" {
		t.Fatalf("a late resolution wrote: %+v %v", kv, err)
	}
}

// TestIntentsMoveWithSplitAndMerge: a split moves the intents on the
// right-hand half's keys into the right-hand range's lock table (reads
// and writes there meet them, resolution there finds them), and a merge
// brings them back.
func TestIntentsMoveWithSplitAndMerge(t *testing.T) {
	s := newStore(t)
	p := s.propose(user, txnWrite(txnA, ts(1000, 0), ts(0, 0), nil, putM("a", "1"), putM("m", "1"), putM("z", "1"))).Version
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left, right := s.split(ctx, user, "g")
	l, r := left.GetRangeId(), right.GetRangeId()
	if nl, nr := s.state(l).Intents, s.state(r).Intents; nl != 1 || nr != 2 {
		t.Fatalf("after the split: %d intents left, %d right", nl, nr)
	}
	if _, _, err := s.reader(r).Get([]byte("m"), p); len(metIntents(t, err)) != 1 {
		t.Fatalf("read of m on the right-hand range: %v", err)
	}
	if page, err := s.reader(l).Scan(rangesm.ScanOptions{End: []byte("g"), Timestamp: p, Limit: 10, MaxBytes: 1 << 20}); len(metIntents(t, err)) != 1 {
		t.Fatalf("scan of the left-hand range: %+v %v", page, err)
	}
	wantConflict(t, "Put on the right-hand range", s.propose(r, put("z", "2", ts(0, 0))), "z")
	// Resolved on the right-hand range: z only.
	if res := s.propose(r, resolve(txnA, p, "z")); res.Err() != nil || res.NodeID != 1 {
		t.Fatalf("resolution on the right-hand range: %+v", res)
	}
	if _, err := s.s.Merge(ctx, l); err != nil {
		t.Fatal(err)
	}
	if n := s.state(l).Intents; n != 2 {
		t.Fatalf("after the merge: %d intents, want 2", n)
	}
	if _, _, err := s.reader(l).MultiGet([][]byte{[]byte("a"), []byte("m"), []byte("z")}, p); len(metIntents(t, err)) != 2 {
		t.Fatalf("read after the merge: %v", err)
	}
	if res := s.propose(l, resolve(txnA, p, "a", "m")); res.Err() != nil || res.NodeID != 2 {
		t.Fatalf("resolution after the merge: %+v", res)
	}
	page, err := s.reader(l).Scan(rangesm.ScanOptions{Timestamp: s.state(l).Frontier, Limit: 10, MaxBytes: 1 << 20})
	if err != nil || len(page.Kvs) != 3 || s.state(l).Intents != 0 {
		t.Fatalf("after resolving everything: %+v %v", page, err)
	}
}

// TestIntentsSurviveARestart: the lock table is replicated state in the
// engine; a replica loaded again (as after a restart or a snapshot,
// Restore) counts it again and reads keep meeting it.
func TestIntentsSurviveARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	open := func(boot bool) (*store, func()) { return openStore(t, dir, boot, rangesm.Config{}) }
	s, stop := open(true)
	p := s.propose(user, txnWrite(txnA, ts(1000, 0), ts(0, 0), nil, putM("a", "1"), putM("b", "1"))).Version
	stop()
	s, stop = open(false)
	defer stop()
	if n := s.state(user).Intents; n != 2 {
		t.Fatalf("after the restart: %d intents, want 2", n)
	}
	if _, _, err := s.reader(user).Get([]byte("b"), p); len(metIntents(t, err)) != 1 {
		t.Fatalf("read after the restart: %v", err)
	}
	wantConflict(t, "Put after the restart", s.propose(user, put("a", "2", ts(0, 0))), "a")
}

func recordOp(id command.TxnID, op command.TxnRecordOp, at hlc.Timestamp, ks ...string) *command.Command {
	c := &command.Command{Kind: command.KindTxnRecord, TxnRecord: command.TxnRecordCmd{ID: id, Op: op, RecordKey: []byte("a"),
		Timestamp: at, Heartbeat: at.WallTime}}
	for _, k := range ks {
		c.TxnRecord.Keys = append(c.TxnRecord.Keys, []byte(k))
	}
	return c
}

func wantRecord(t *testing.T, what string, res command.Result, status rangesm.TxnStatus, at hlc.Timestamp) {
	t.Helper()
	if res.Err() != nil || rangesm.TxnStatus(res.NodeID) != status || res.Version != at {
		t.Fatalf("%s: %+v, want %v at %s", what, res, status, at)
	}
}

// TestTxnRecordMovesOnlyForward: a record is staged, re-staged only
// upwards, committed at or above its staging timestamp, and once
// committed or aborted never changes again; an abort of a missing record
// creates it aborted, so that it can never be staged; recovery's abort
// applies only to the staging timestamp it checked.
func TestTxnRecordMovesOnlyForward(t *testing.T) {
	s := newStore(t)
	wantRecord(t, "stage", s.propose(user, recordOp(txnA, command.TxnStage, ts(100, 0), "a", "b")), rangesm.TxnStaging, ts(100, 0))
	wantRecord(t, "re-stage below", s.propose(user, recordOp(txnA, command.TxnStage, ts(90, 0), "a", "b")), rangesm.TxnStaging, ts(100, 0))
	wantRecord(t, "re-stage above", s.propose(user, recordOp(txnA, command.TxnStage, ts(120, 0), "a", "b")), rangesm.TxnStaging, ts(120, 0))
	// A commit is at the intents' highest p, below the staging bound S
	// when every intent is in under it (docs/transactions.md, "Pushed
	// intents").
	wantRecord(t, "abort of another bound", s.propose(user, recordOp(txnA, command.TxnAbort, ts(100, 0))), rangesm.TxnStaging, ts(120, 0))
	wantRecord(t, "commit below the bound", s.propose(user, recordOp(txnA, command.TxnCommitRecord, ts(110, 0))), rangesm.TxnCommitted, ts(110, 0))
	wantRecord(t, "abort after commit", s.propose(user, recordOp(txnA, command.TxnAbort, hlc.Timestamp{})), rangesm.TxnCommitted, ts(110, 0))
	wantRecord(t, "stage after commit", s.propose(user, recordOp(txnA, command.TxnStage, ts(200, 0), "a")), rangesm.TxnCommitted, ts(110, 0))
	rec, err := rangesm.ReadTxnRecord(s.db, user, txnA)
	if err != nil || rec.Status != rangesm.TxnCommitted || len(rec.Keys) != 2 || string(rec.RecordKey) != "a" || rec.Heartbeat != 120 {
		t.Fatalf("ReadTxnRecord: %+v %v", rec, err)
	}
	if res := s.propose(user, recordOp(txnA, command.TxnDelete, hlc.Timestamp{})); res.Err() != nil {
		t.Fatalf("delete: %+v", res)
	}
	if rec, err := rangesm.ReadTxnRecord(s.db, user, txnA); err != nil || rec.Status != rangesm.TxnMissing {
		t.Fatalf("after the delete: %+v %v", rec, err)
	}
	// A record aborted before its coordinator staged it stays aborted.
	wantRecord(t, "abort of a missing record", s.propose(user, recordOp(txnB, command.TxnAbort, ts(50, 0))), rangesm.TxnAborted, hlc.Timestamp{})
	wantRecord(t, "late stage", s.propose(user, recordOp(txnB, command.TxnStage, ts(300, 0), "a")), rangesm.TxnAborted, hlc.Timestamp{})
	// A pusher's abort of a record it found missing (at MaxTimestamp,
	// node/txn_intents.go) creates it ABORTED, but leaves alone a record
	// staged since: that transaction may be committed and acknowledged.
	wantRecord(t, "pusher's abort of a missing record", s.propose(user, recordOp(command.TxnID{0xd}, command.TxnAbort, hlc.MaxTimestamp)), rangesm.TxnAborted, hlc.Timestamp{})
	s.propose(user, recordOp(command.TxnID{0xe}, command.TxnStage, ts(300, 0), "a"))
	wantRecord(t, "pusher's abort of a record staged since", s.propose(user, recordOp(command.TxnID{0xe}, command.TxnAbort, hlc.MaxTimestamp)), rangesm.TxnStaging, ts(300, 0))
	// A staging record is not deleted.
	s.propose(user, recordOp(command.TxnID{0xc}, command.TxnStage, ts(300, 0), "a"))
	s.propose(user, recordOp(command.TxnID{0xc}, command.TxnDelete, hlc.Timestamp{}))
	if rec, _ := rangesm.ReadTxnRecord(s.db, user, command.TxnID{0xc}); rec.Status != rangesm.TxnStaging {
		t.Fatalf("a staging record was deleted: %+v", rec)
	}
}

// TestTxnCommitResolvesItsRange: a commit carrying the keys of the
// record range's intents marks the record COMMITTED and resolves them at
// its C in the same command (and, sent again, changes nothing); one that
// does not apply (the record aborted) resolves nothing. A delete carrying
// other IDs deletes those of them that are finished, not a staging one.
func TestTxnCommitResolvesItsRange(t *testing.T) {
	s := newStore(t)
	p := s.propose(user, txnWrite(txnA, ts(100, 0), ts(0, 0), nil, putM("a", "1"), putM("b", "2"))).Version
	s.propose(user, recordOp(txnA, command.TxnStage, p.Add(time.Second), "a", "b", "z"))
	c := p.Add(time.Millisecond)
	wantRecord(t, "commit with keys", s.propose(user, recordOp(txnA, command.TxnCommitRecord, c, "a", "b")), rangesm.TxnCommitted, c)
	if st := s.state(user); st.Intents != 0 || st.Frontier != c {
		t.Fatalf("after the commit: %+v, want no intents and the frontier at %s", st, c)
	}
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		if kv, _, err := s.reader(user).Get([]byte(k), c); err != nil || string(kv.Value) != want || kv.Version != c {
			t.Fatalf("%s after the commit: %+v %v, want %s at %s", k, kv, err, want, c)
		}
	}
	wantRecord(t, "commit sent again", s.propose(user, recordOp(txnA, command.TxnCommitRecord, c, "a", "b")), rangesm.TxnCommitted, c)

	// An aborted record's commit resolves nothing.
	s.propose(user, txnWrite(txnB, ts(0, 0), ts(0, 0), nil, putM("d", "1")))
	s.propose(user, recordOp(txnB, command.TxnAbort, hlc.Timestamp{}))
	if res := s.propose(user, recordOp(txnB, command.TxnCommitRecord, ts(9000, 0), "d")); rangesm.TxnStatus(res.NodeID) != rangesm.TxnAborted {
		t.Fatalf("commit of an aborted record: %+v", res)
	}
	if n := s.state(user).Intents; n != 1 {
		t.Fatalf("the commit of an aborted record resolved its intent: %d intents, want 1", n)
	}

	// A batch of deletes: A (committed) and B (aborted) go, C (staging)
	// stays; an unknown ID is skipped.
	txnC := command.TxnID{0xc}
	s.propose(user, recordOp(txnC, command.TxnStage, ts(300, 0), "a"))
	del := recordOp(txnA, command.TxnDelete, hlc.Timestamp{})
	del.TxnRecord.Keys = [][]byte{txnB[:], txnC[:], (&command.TxnID{0xf})[:]}
	if res := s.propose(user, del); res.Err() != nil {
		t.Fatalf("batch delete: %+v", res)
	}
	for id, want := range map[command.TxnID]rangesm.TxnStatus{txnA: rangesm.TxnMissing, txnB: rangesm.TxnMissing, txnC: rangesm.TxnStaging} {
		if rec, err := rangesm.ReadTxnRecord(s.db, user, id); err != nil || rec.Status != want {
			t.Fatalf("record %s after the batch delete: %+v %v, want %v", id, rec, err, want)
		}
	}
}

// TestTxnPreventStopsAMissingIntent: recovery's check finds a staging
// transaction's intents present at or below C0, or makes a missing one
// impossible there: the range's frontier rises to C0, so the intent, if
// it ever comes, is above C0 (and the transaction cannot commit at C0).
func TestTxnPreventStopsAMissingIntent(t *testing.T) {
	s := newStore(t)
	p := s.propose(user, txnWrite(txnA, ts(100, 0), ts(0, 0), nil, putM("a", "1"))).Version
	c0 := p.Add(time.Microsecond)
	prevent := func(ks ...string) command.Result {
		c := &command.Command{Kind: command.KindTxnPrevent, TxnPrevent: command.TxnPrevent{ID: txnA, Timestamp: c0}}
		for _, k := range ks {
			c.TxnPrevent.Keys = append(c.TxnPrevent.Keys, []byte(k))
		}
		return s.propose(user, c)
	}
	if res := prevent("a"); res.Err() != nil || !res.Found || res.Version != p {
		t.Fatalf("present intent: %+v, want found at %s", res, p)
	}
	if s.state(user).Frontier != p {
		t.Fatal("a check that found every intent moved the frontier")
	}
	if res := prevent("a", "b"); res.Err() != nil || res.Found || string(res.Value) != "b" {
		t.Fatalf("missing intent: %+v", res)
	}
	if f := s.state(user).Frontier; f.Less(c0) {
		t.Fatalf("after preventing: frontier %s below C0 %s", f, c0)
	}
	// The late intent lands above C0.
	if late := s.propose(user, txnWrite(txnA, ts(0, 0), ts(0, 0), nil, putM("b", "1"))).Version; late.LessEq(c0) {
		t.Fatalf("late intent at %s, at or below C0 %s", late, c0)
	}
	if res := prevent("a", "b"); res.Found {
		t.Fatalf("an intent above C0 counted as present: %+v", res)
	}
}

// TestTxnRecordsMoveWithSplitAndMerge: a record lives on the range that
// holds its record key, through splits and merges.
func TestTxnRecordsMoveWithSplitAndMerge(t *testing.T) {
	s := newStore(t)
	stage := func(id command.TxnID, rk string) *command.Command {
		c := recordOp(id, command.TxnStage, ts(100, 0), rk)
		c.TxnRecord.RecordKey = []byte(rk)
		return c
	}
	s.propose(user, stage(txnA, "a"))
	s.propose(user, stage(txnB, "m"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left, right := s.split(ctx, user, "g")
	l, r := left.GetRangeId(), right.GetRangeId()
	for _, c := range []struct {
		rangeID uint64
		id      command.TxnID
		want    rangesm.TxnStatus
	}{{l, txnA, rangesm.TxnStaging}, {l, txnB, rangesm.TxnMissing}, {r, txnB, rangesm.TxnStaging}, {r, txnA, rangesm.TxnMissing}} {
		if rec, err := rangesm.ReadTxnRecord(s.db, c.rangeID, c.id); err != nil || rec.Status != c.want {
			t.Fatalf("after the split, range %d, %s: %+v %v", c.rangeID, c.id, rec, err)
		}
	}
	c := recordOp(txnB, command.TxnCommitRecord, ts(100, 0))
	c.TxnRecord.RecordKey = []byte("m")
	wantRecord(t, "commit on the right-hand range", s.propose(r, c), rangesm.TxnCommitted, ts(100, 0))
	if _, err := s.s.Merge(ctx, l); err != nil {
		t.Fatal(err)
	}
	if rec, err := rangesm.ReadTxnRecord(s.db, l, txnB); err != nil || rec.Status != rangesm.TxnCommitted {
		t.Fatalf("after the merge: %+v %v", rec, err)
	}
}

// TestIntentsHoldTheFeed: while a range holds intents its change feed's
// frontier stays below the lowest intent and its batches are reported
// incomplete (watchers read history instead), and so is the batch that
// resolves the last one: the version a resolution writes, below the
// range's frontier, is never behind what a watcher was told.
func TestIntentsHoldTheFeed(t *testing.T) {
	sk := &sink{}
	sk.watched.Store(true)
	s := newStoreConfig(t, rangesm.Config{Feed: sk})
	s.propose(user, put("a", "0", ts(100, 0)))
	p := s.propose(user, txnWrite(txnA, ts(200, 0), ts(0, 0), nil, putM("b", "1"))).Version
	m := sk.mark()
	s.propose(user, put("c", "1", ts(300, 0)))
	if _, complete, f := sk.since(m); complete || !f.Less(p) {
		t.Fatalf("a write beside an intent: complete %v, feed frontier %s (intent at %s)", complete, f, p)
	}
	if st := s.state(user); !st.FeedFrontier.Less(p) || st.Frontier.Less(ts(300, 0)) {
		t.Fatalf("published state: %+v", st)
	}
	m = sk.mark()
	c := s.state(user).Frontier.Next()
	s.propose(user, resolve(txnA, c, "b"))
	if _, complete, f := sk.since(m); complete || f != c {
		t.Fatalf("the resolving batch: complete %v, feed frontier %s, want %s", complete, f, c)
	}
	m = sk.mark()
	s.propose(user, put("d", "1", ts(0, 0)))
	if changes, complete, _ := sk.since(m); !complete || len(changes) != 1 {
		t.Fatalf("after the intents: %v %v", changes, complete)
	}
}

// TestFoldedResolveClearsTheWay: a TxnWrite carrying the committed
// resolution of another transaction's intents (TxnWrite.Resolve) turns
// them into versions at their commit timestamp first, so its own intent
// on the same key goes in above them (Result.Found: the resolutions
// applied); a folded resolution of a transaction that holds no intent
// there changes nothing, and the write is refused on the intent it left,
// as without it.
func TestFoldedResolveClearsTheWay(t *testing.T) {
	s := newStore(t)
	s.propose(user, put("a", "0", ts(100, 0)))
	res := s.propose(user, txnWrite(txnA, ts(150, 0), hlc.Timestamp{}, nil, putM("a", "1"), putM("b", "1")))
	pa := res.Version
	if res.Err() != nil {
		t.Fatalf("TxnWrite of A: %+v", res)
	}
	c := ts(300, 0)
	// Another transaction's resolution: nothing, and B meets A's intent.
	w := txnWrite(txnB, ts(350, 0), hlc.Timestamp{}, nil, putM("a", "2"))
	w.TxnWrite.Resolve = []command.TxnResolve{{ID: command.TxnID{0xc}, Committed: true, CommitTimestamp: c, Keys: [][]byte{[]byte("a")}}}
	wantConflict(t, "a write folding another transaction's resolution", s.propose(user, w), "a")
	if st := s.state(user); st.Intents != 2 {
		t.Fatalf("after the fold of nothing: %d intents, want A's 2", st.Intents)
	}
	// A's, with a's key only: a resolves, b stays A's intent.
	w.TxnWrite.Resolve[0].ID = txnA
	res = s.propose(user, w)
	if res.Err() != nil || !res.Found || !pa.Less(res.Version) || !c.Less(res.Version) {
		t.Fatalf("TxnWrite of B folding A's resolution: %+v", res)
	}
	if kv, found, err := s.reader(user).Get([]byte("a"), c); err != nil || !found || string(kv.Value) != "1" || kv.Version != c {
		t.Fatalf("a at A's commit timestamp: %+v %v %v", kv, found, err)
	}
	if _, _, err := s.reader(user).Get([]byte("a"), res.Version); len(metIntents(t, err)) != 1 {
		t.Fatalf("a at B's p: %v, want B's intent", err)
	}
	if _, _, err := s.reader(user).Get([]byte("b"), res.Version); len(metIntents(t, err)) != 1 {
		t.Fatalf("b: %v, want A's intent still", err)
	}
}

// TestCarriedCommitResolvesAfterTheRecord: a write carrying another
// transaction's COMMITTED (a fold with its record key) marks the record
// COMMITTED and resolves its intents here before its own checks, so its
// intent on the same key goes in; the same fold of a record that is not
// STAGING or COMMITTED (aborted) resolves nothing and answers Found
// false. A write's record deletions delete the finished ones only.
func TestCarriedCommitResolvesAfterTheRecord(t *testing.T) {
	s := newStore(t)
	pa := s.propose(user, txnWrite(txnA, ts(100, 0), hlc.Timestamp{}, nil, putM("a", "1"), putM("b", "1"))).Version
	wantRecord(t, "stage A", s.propose(user, recordOp(txnA, command.TxnStage, pa.Add(time.Second), "a", "b", "z")), rangesm.TxnStaging, pa.Add(time.Second))
	c := pa
	w := txnWrite(txnB, ts(350, 0), hlc.Timestamp{}, nil, putM("a", "2"))
	w.TxnWrite.Resolve = []command.TxnResolve{{ID: txnA, Committed: true, CommitTimestamp: c, Keys: [][]byte{[]byte("a"), []byte("b")}, Record: []byte("a")}}
	res := s.propose(user, w)
	if res.Err() != nil || !res.Found || !c.Less(res.Version) {
		t.Fatalf("TxnWrite of B carrying A's COMMITTED: %+v", res)
	}
	if rec, err := rangesm.ReadTxnRecord(s.db, user, txnA); err != nil || rec.Status != rangesm.TxnCommitted || rec.Timestamp != c {
		t.Fatalf("A's record after the carried commit: %+v %v, want COMMITTED at %s", rec, err, c)
	}
	for _, k := range []string{"a", "b"} {
		if kv, found, err := s.reader(user).Get([]byte(k), c); err != nil || !found || string(kv.Value) != "1" || kv.Version != c {
			t.Fatalf("%s at A's commit timestamp: %+v %v %v", k, kv, found, err)
		}
	}
	if st := s.state(user); st.Intents != 1 {
		t.Fatalf("after the carried commit: %d intents, want B's 1", st.Intents)
	}

	// An aborted record: nothing resolved, Found false.
	txnC := command.TxnID{0xc}
	s.propose(user, txnWrite(txnC, ts(0, 0), hlc.Timestamp{}, nil, putM("d", "1")))
	s.propose(user, recordOp(txnC, command.TxnAbort, hlc.Timestamp{}))
	w = txnWrite(command.TxnID{0xd}, ts(0, 0), hlc.Timestamp{}, nil, putM("e", "1"))
	w.TxnWrite.Resolve = []command.TxnResolve{{ID: txnC, Committed: true, CommitTimestamp: ts(9000, 0), Keys: [][]byte{[]byte("d")}, Record: []byte("a")}}
	if res := s.propose(user, w); res.Err() != nil || res.Found {
		t.Fatalf("a write carrying an aborted record's COMMITTED: %+v, want written, Found false", res)
	}
	if rec, _ := rangesm.ReadTxnRecord(s.db, user, txnC); rec.Status != rangesm.TxnAborted {
		t.Fatalf("the aborted record after a carried commit: %+v", rec)
	}
	if st := s.state(user); st.Intents != 3 {
		t.Fatalf("after the carried commit of an aborted record: %d intents, want 3 (B's, C's, D's)", st.Intents)
	}

	// A write deleting finished records: A (committed) and C (aborted)
	// go, E (staging) stays, an unknown ID is skipped; whether or not
	// the write then writes (this one meets B's intent).
	txnE := command.TxnID{0xe}
	s.propose(user, recordOp(txnE, command.TxnStage, ts(400, 0), "a"))
	w = txnWrite(command.TxnID{0xf}, ts(0, 0), hlc.Timestamp{}, nil, putM("a", "3"))
	w.TxnWrite.DeleteRecords = []command.TxnID{txnA, txnC, txnE, {0x1f}}
	wantConflict(t, "a write deleting records", s.propose(user, w), "a")
	for id, want := range map[command.TxnID]rangesm.TxnStatus{txnA: rangesm.TxnMissing, txnC: rangesm.TxnMissing, txnE: rangesm.TxnStaging} {
		if rec, err := rangesm.ReadTxnRecord(s.db, user, id); err != nil || rec.Status != want {
			t.Fatalf("record %s after the write's deletions: %+v %v, want %v", id, rec, err, want)
		}
	}
}
