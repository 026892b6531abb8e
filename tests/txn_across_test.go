package tests

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// TestTxnAcrossRanges: bank transfers between accounts on three ranges,
// concurrently, with whole-bank reads in transactions: every read sees
// the same total, and the final balances add up.
func TestTxnAcrossRanges(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, k := range []string{"h", "p"} {
		if _, _, err := c.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	accounts := []string{"a1", "a2", "i1", "i2", "q1", "q2"}
	const start = 100
	for _, a := range accounts {
		if err := c.Put(ctx, []byte(a), []byte(strconv.Itoa(start))); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([][]byte, len(accounts))
	for i, a := range accounts {
		keys[i] = []byte(a)
	}
	readAll := func(tx *client.Tx) ([]int, error) {
		rs, err := tx.BatchGet(ctx, keys)
		if err != nil {
			return nil, err
		}
		out := make([]int, len(rs))
		for i, r := range rs {
			if out[i], err = strconv.Atoi(string(r.Value)); err != nil {
				return nil, fmt.Errorf("%s = %q: %v", accounts[i], r.Value, err)
			}
		}
		return out, nil
	}
	// Witnesses: keys no transfer writes, one per range, so that each
	// transfer also reads a range it does not write (validated before its
	// intents go in).
	witness := [][]byte{[]byte("a0"), []byte("i0"), []byte("q0")}
	for _, k := range witness {
		if err := c.Put(ctx, k, []byte("w")); err != nil {
			t.Fatal(err)
		}
	}
	// A bounded workload: three workers on disjoint pairs of accounts,
	// each pair across two ranges and reading the third range's witness
	// (they never conflict with each other), and one worker whose
	// transfers read the whole bank (it conflicts with every other
	// commit and runs again, so the retry path across ranges is taken;
	// the disjoint workers finish after their 15 transfers, so it is not
	// starved for long). Every transfer reading everything, as this test
	// once did, made all of them conflict with each other and its running
	// time depend on the machine's load (from 2 s to 2 minutes).
	transferIn := func(tx *client.Tx, read [][]byte, from, to, amt int) error {
		rs, err := tx.BatchGet(ctx, read)
		if err != nil {
			return err
		}
		bal := map[string]int{}
		for i, r := range rs {
			if len(r.Value) == 0 {
				return fmt.Errorf("%s is missing", read[i])
			}
			if r.Value[0] == 'w' {
				continue
			}
			if bal[string(read[i])], err = strconv.Atoi(string(r.Value)); err != nil {
				return fmt.Errorf("%s = %q: %v", read[i], r.Value, err)
			}
		}
		if err := tx.Put(keys[from], []byte(strconv.Itoa(bal[accounts[from]]-amt))); err != nil {
			return err
		}
		return tx.Put(keys[to], []byte(strconv.Itoa(bal[accounts[to]]+amt)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	pairs := []struct{ a, b, witness int }{{0, 2, 2}, {3, 4, 0}, {5, 1, 1}} // a1-i1 (q0), i2-q1 (a0), q2-a2 (i0)
	for w, pr := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				from, to := pr.a, pr.b
				if i%2 == 1 {
					from, to = to, from
				}
				err := c.Txn(ctx, func(tx *client.Tx) error {
					return transferIn(tx, [][]byte{keys[from], keys[to], witness[pr.witness]}, from, to, 1+i%5)
				})
				if err != nil {
					errs <- fmt.Errorf("transfer %d/%d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 8 {
			from, to := i%len(accounts), (3*i+1)%len(accounts)
			if from == to {
				to = (to + 1) % len(accounts)
			}
			err := c.Txn(ctx, func(tx *client.Tx) error {
				return transferIn(tx, keys, from, to, 1+i%5)
			})
			if err != nil {
				errs <- fmt.Errorf("whole-bank transfer %d: %w", i, err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			var total int
			err := c.Txn(ctx, func(tx *client.Tx) error {
				bal, err := readAll(tx)
				total = 0
				for _, b := range bal {
					total += b
				}
				return err
			})
			if err != nil {
				errs <- err
				return
			}
			if total != start*len(accounts) {
				errs <- fmt.Errorf("a whole-bank read saw a total of %d, want %d", total, start*len(accounts))
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The plain reads (after the resolution that follows each commit, or
	// through it) agree.
	rs, err := c.BatchGet(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range rs {
		v, _ := strconv.Atoi(string(r.Value))
		total += v
	}
	if total != start*len(accounts) {
		t.Fatalf("final total %d, want %d", total, start*len(accounts))
	}
	// The one-call conditional form across ranges: compares on two
	// ranges, writes on a third.
	res, err := c.CondTxn(ctx, []client.Compare{client.CompareValue([]byte("a1"), client.CmpEqual, rs[0].Value),
		client.CompareValue([]byte("i1"), client.CmpEqual, rs[2].Value)},
		[]client.TxnOp{client.OpPut([]byte("q9"), []byte("then")), client.OpGet([]byte("a1"))},
		[]client.TxnOp{client.OpPut([]byte("q9"), []byte("else"))})
	if err != nil || !res.Succeeded || len(res.Gets) != 1 || string(res.Gets[0].Value) != string(rs[0].Value) {
		t.Fatalf("CondTxn across ranges: %+v %v", res, err)
	}
	if v, _, err := c.Get(ctx, []byte("q9")); err != nil || string(v) != "then" {
		t.Fatalf("q9 after CondTxn: %q %v", v, err)
	}
	// A transaction across ranges cannot delete a span yet: refused,
	// nothing applied.
	err = c.Txn(ctx, func(tx *client.Tx) error {
		if err := tx.Put([]byte("a1"), []byte("0")); err != nil {
			return err
		}
		return tx.DeleteRange([]byte("p"), []byte("z"))
	})
	if !errors.Is(err, client.ErrTxnSpansRanges) {
		t.Fatalf("delete range across ranges: %v", err)
	}
}

// childEnv names the node address and the mode of the coordinator
// process TestTxnCoordinatorKilled starts.
const childEnv = "SHALE_TXN_COORDINATOR_CHILD"

// TestTxnCoordinatorChild is not a test of its own: run by
// TestTxnCoordinatorKilled as a separate process, it is the coordinator
// of a transaction across ranges that writes its intents and stages its
// record (all intents, or all but the one on "n"; or, "pushed", all with
// the one on "n" pushed above C0 by a write of "o" first and the record
// staged at C0 + 1 s, as a transfer's is), says so on stdout and waits
// to be killed.
func TestTxnCoordinatorChild(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("run by TestTxnCoordinatorKilled")
	}
	addr, mode, _ := strings.Cut(env, ",")
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	txn := kvpb.NewTxnClient(cc)
	ctx := context.Background()
	b, err := txn.Begin(ctx, &kvpb.TxnBeginRequest{Header: &kvpb.RequestHeader{}})
	if err != nil {
		t.Fatal(err)
	}
	c0 := b.GetReadTimestamp()
	id := make([]byte, 16)
	rand.Read(id)
	put := func(k, v string) *kvpb.Mutation {
		return &kvpb.Mutation{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte(k), Value: []byte(v)}}}
	}
	writes := map[string]string{"a": "70", "n": "130"}
	bound := c0
	var highest *kvpb.Timestamp
	for _, k := range []string{"a", "n"} {
		if k == "n" && mode == "missing" {
			continue
		}
		if k == "n" && mode == "pushed" {
			if _, err := kvpb.NewKVClient(cc).Put(ctx, &kvpb.PutRequest{Header: &kvpb.RequestHeader{}, Key: []byte("o"), Value: []byte("push")}); err != nil {
				t.Fatal(err)
			}
			bound = &kvpb.Timestamp{WallNanos: c0.GetWallNanos() + int64(time.Second), Logical: c0.GetLogical()}
		}
		resp, err := txn.Write(ctx, &kvpb.TxnWriteRequest{Header: &kvpb.RequestHeader{}, TxnId: id, RecordKey: []byte("a"),
			Mutations: []*kvpb.Mutation{put(k, writes[k])}, CommitTimestamp: c0})
		if err != nil || !resp.GetWritten() {
			t.Fatalf("Write %s: %v %v", k, resp, err)
		}
		highest = resp.GetVersion() // n's, the later: at or above a's
	}
	if mode == "pushed" && highest.GetWallNanos() == c0.GetWallNanos() && highest.GetLogical() == c0.GetLogical() {
		t.Fatalf("the intent on n went in at C0 %v, not pushed above it", c0)
	}
	rec, err := txn.Record(ctx, &kvpb.TxnRecordRequest{Header: &kvpb.RequestHeader{}, TxnId: id, Op: kvpb.TxnRecordOp_TXN_RECORD_STAGE,
		RecordKey: []byte("a"), Timestamp: bound, HeartbeatUnixNanos: time.Now().UnixNano(), Keys: [][]byte{[]byte("a"), []byte("n")}})
	if err != nil || rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_STAGING {
		t.Fatalf("stage: %v %v", rec, err)
	}
	fmt.Printf("staged %x %d %d %d %d\n", id, c0.GetWallNanos(), c0.GetLogical(), highest.GetWallNanos(), highest.GetLogical())
	select {} // until killed
}

// TestTxnCoordinatorKilled: the coordinator of a transfer across two
// ranges is a process killed with SIGKILL after it wrote its intents and
// staged its record, before it acknowledged or resolved anything. Other
// clients that then read or write the keys wait for the record's
// heartbeat to expire, recover the transaction and go on: with every
// intent in, it committed (the transfer is there, the total holds); with
// one intent missing, it is aborted (nothing of it is there), and the
// missing intent, sent late, can no longer commit it; with every intent
// in under its staging bound but one above C0, it committed at that
// intent's version (the highest), which both keys get.
func TestTxnCoordinatorKilled(t *testing.T) {
	for _, mode := range []string{"all", "missing", "pushed"} {
		t.Run(mode, func(t *testing.T) {
			node := startNode(t, filepath.Join(t.TempDir(), "n"))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, err := client.Dial(ctx, []string{node.grpcAddr}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, _, err := c.Split(ctx, []byte("m")); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"a", "n"} {
				if err := c.Put(ctx, []byte(k), []byte("100")); err != nil {
					t.Fatal(err)
				}
			}
			child := exec.Command(os.Args[0], "-test.run=^TestTxnCoordinatorChild$", "-test.count=1")
			child.Env = append(os.Environ(), childEnv+"="+node.grpcAddr+","+mode)
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			child.Stderr = os.Stderr
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			staged := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "staged ") {
						staged <- sc.Text()
					}
				}
				close(staged)
			}()
			var line string
			select {
			case line = <-staged:
			case <-ctx.Done():
				t.Fatal("the coordinator never staged")
			}
			if line == "" {
				t.Fatal("the coordinator exited before staging")
			}
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			var id []byte
			var wall, pWall int64
			var logical, pLogical uint32
			if _, err := fmt.Sscanf(line, "staged %x %d %d %d %d", &id, &wall, &logical, &pWall, &pLogical); err != nil {
				t.Fatalf("%q: %v", line, err)
			}

			want := map[string]string{"a": "70", "n": "130"}
			if mode == "missing" {
				want = map[string]string{"a": "100", "n": "100"}
			}
			began := time.Now()
			for _, k := range []string{"a", "n"} {
				v, _, err := c.Get(ctx, []byte(k))
				// Pushed, the transaction commits above C0: a read of a
				// at its range's frontier, below that, which met the
				// intent at C0 and recovered the transaction, is right
				// to answer the value before it (the coordinator never
				// acknowledged it).
				if err != nil || (string(v) != want[k] && (mode != "pushed" || k != "a" || string(v) != "100")) {
					t.Fatalf("%s after the coordinator died: %q %v, want %q", k, v, err, want[k])
				}
			}
			t.Logf("reads went on %v after the coordinator died", time.Since(began).Round(time.Millisecond))
			if mode == "pushed" {
				at := client.Timestamp{WallTime: pWall, Logical: int32(pLogical)}
				for _, k := range []string{"a", "n"} {
					r, err := c.GetVersioned(ctx, []byte(k))
					if err != nil || string(r.Value) != want[k] || r.Version != at {
						t.Fatalf("%s after recovery: %+v %v, want %q at the highest intent's version %s", k, r, err, want[k], at)
					}
				}
			}
			cc, err := grpc.NewClient(node.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			// The record holds recovery's decision (and keeps it, for a
			// coordinator that might still be alive).
			rec, err := kvpb.NewTxnClient(cc).Record(ctx, &kvpb.TxnRecordRequest{Header: &kvpb.RequestHeader{}, TxnId: id, RecordKey: []byte("a")})
			wantStatus := kvpb.TxnStatus_TXN_STATUS_COMMITTED
			if mode == "missing" {
				wantStatus = kvpb.TxnStatus_TXN_STATUS_ABORTED
			}
			if err != nil || rec.GetStatus() != wantStatus {
				t.Fatalf("the record after recovery: %v %v, want %v", rec, err, wantStatus)
			}
			if mode == "missing" {
				// The missing intent, sent late (a delayed message of
				// the dead coordinator), lands above C0: the transaction
				// stays aborted and the intent is dropped by the next
				// reader.
				c0 := &kvpb.Timestamp{WallNanos: wall, Logical: logical}
				resp, err := kvpb.NewTxnClient(cc).Write(ctx, &kvpb.TxnWriteRequest{Header: &kvpb.RequestHeader{}, TxnId: id, RecordKey: []byte("a"),
					Mutations:       []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("n"), Value: []byte("130")}}}},
					CommitTimestamp: c0})
				if err != nil {
					t.Fatal(err)
				}
				if p := resp.GetVersion(); resp.GetWritten() && (p.GetWallNanos() < wall || (p.GetWallNanos() == wall && p.GetLogical() <= logical)) {
					t.Fatalf("the late intent went in at %v, at or below C0 %v", p, c0)
				}
				if v, _, err := c.Get(ctx, []byte("n")); err != nil || string(v) != "100" {
					t.Fatalf("n after the late intent: %q %v", v, err)
				}
			}
			// Nothing stays locked: a transaction across both ranges
			// commits.
			err = c.Txn(ctx, func(tx *client.Tx) error {
				if err := tx.Put([]byte("a"), []byte("50")); err != nil {
					return err
				}
				return tx.Put([]byte("n"), []byte("150"))
			})
			if err != nil {
				t.Fatal(err)
			}
			rs, err := c.BatchGet(ctx, [][]byte{[]byte("a"), []byte("n")})
			if err != nil || string(rs[0].Value) != "50" || string(rs[1].Value) != "150" {
				t.Fatalf("after the last transaction: %+v %v", rs, err)
			}
		})
	}
}

// loopEnv names the node address for the coordinator process of
// TestTxnCoordinatorKilledAtRandom.
const loopEnv = "SHALE_TXN_TRANSFER_LOOP"

// TestTxnTransferLoopChild is not a test of its own: run by
// TestTxnCoordinatorKilledAtRandom as a separate process, it moves money
// between accounts on two ranges through client.Txn until it is killed.
func TestTxnTransferLoopChild(t *testing.T) {
	addr := os.Getenv(loopEnv)
	if addr == "" {
		t.Skip("run by TestTxnCoordinatorKilledAtRandom")
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, []string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("running")
	for i := 0; ; i++ {
		from, to := []byte("a"), []byte("n")
		if i%2 == 1 {
			from, to = to, from
		}
		_ = c.Txn(ctx, func(tx *client.Tx) error {
			rs, err := tx.BatchGet(ctx, [][]byte{from, to})
			if err != nil {
				return err
			}
			f, _ := strconv.Atoi(string(rs[0].Value))
			g, _ := strconv.Atoi(string(rs[1].Value))
			if err := tx.Put(from, []byte(strconv.Itoa(f-1))); err != nil {
				return err
			}
			return tx.Put(to, []byte(strconv.Itoa(g+1)))
		})
	}
}

// TestTxnCoordinatorKilledAtRandom: a process running transfers across two
// ranges through client.Txn is killed with SIGKILL at random moments,
// several times; whatever it was doing (reading, writing intents,
// staging, resolving), the keys stay readable and writable by others
// and the total holds.
func TestTxnCoordinatorKilledAtRandom(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "n"} {
		if err := c.Put(ctx, []byte(k), []byte("100")); err != nil {
			t.Fatal(err)
		}
	}
	total := func() int {
		t.Helper()
		var sum int
		err := c.Txn(ctx, func(tx *client.Tx) error {
			rs, err := tx.BatchGet(ctx, [][]byte{[]byte("a"), []byte("n")})
			if err != nil {
				return err
			}
			sum = 0
			for _, r := range rs {
				v, _ := strconv.Atoi(string(r.Value))
				sum += v
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	for round := range 4 {
		child := exec.Command(os.Args[0], "-test.run=^TestTxnTransferLoopChild$", "-test.count=1")
		child.Env = append(os.Environ(), loopEnv+"="+node.grpcAddr)
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		if !bufio.NewScanner(out).Scan() {
			t.Fatal("the transfer process did not start")
		}
		time.Sleep(time.Duration(200+150*round) * time.Millisecond) // let it commit some, then die mid-flight
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		if got := total(); got != 200 {
			t.Fatalf("round %d: total %d after the coordinator was killed, want 200", round, got)
		}
		v, _, _ := c.Get(ctx, []byte("a"))
		t.Logf("round %d: a = %s after the kill (the transfers alternate between a and n)", round, v)
	}
	// Nothing stays locked: a plain write and a transaction across both
	// ranges go through.
	if err := c.Put(ctx, []byte("a"), []byte("100")); err != nil {
		t.Fatal(err)
	}
	if err := c.Txn(ctx, func(tx *client.Tx) error {
		if err := tx.Put([]byte("a"), []byte("99")); err != nil {
			return err
		}
		return tx.Put([]byte("n"), []byte("101"))
	}); err != nil {
		t.Fatal(err)
	}
}
