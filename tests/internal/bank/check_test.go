package bank

import (
	"strings"
	"testing"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// Hand-written histories: each bad read is planted, so a checker that
// accepts everything cannot pass.

var small = Config{Accounts: 3, Initial: 10}

func read(inv, comp int64, a, b, c int64) Op {
	return Op{Kind: Read, Outcome: txnkv.OK, Invoke: inv, Complete: comp,
		Balances: map[string]int64{"bank/000": a, "bank/001": b, "bank/002": c}}
}

func xfer(inv, comp int64, from, to string, amount int64, oc txnkv.Outcome) Op {
	return Op{Kind: Transfer, Outcome: oc, Invoke: inv, Complete: comp, From: "bank/" + from, To: "bank/" + to, Amount: amount}
}

func TestCheckValid(t *testing.T) {
	h := []Op{
		read(0, 5, 10, 10, 10),
		xfer(10, 20, "000", "001", 5, txnkv.OK),
		read(15, 25, 5, 15, 10),
		xfer(30, 40, "002", "000", 20, txnkv.Fail),
		{Kind: Read, Outcome: txnkv.Info, Invoke: 30, Complete: 40}, // no balances: skipped
		{Kind: Read, Outcome: txnkv.Fail, Invoke: 30, Complete: 40},
		read(50, 60, 5, 15, 10),
	}
	res := Check(small, h)
	if !res.Valid() || res.Reads != 3 {
		t.Fatalf("want 3 good reads, got:\n%s", res)
	}
}

func TestCheckBadReads(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		h       []Op
		problem string // in the first bad read's problems
	}{
		{"torn read: one side of a transfer", small, []Op{
			xfer(10, 20, "000", "001", 5, txnkv.OK),
			read(12, 18, 5, 10, 10),
		}, "sum to 25, not 30 (-5)"},
		{"lost update: two transfers from one balance", small, []Op{
			read(0, 5, 10, 10, 10),
			xfer(10, 20, "000", "001", 5, txnkv.OK),
			xfer(10, 20, "000", "002", 5, txnkv.OK),
			read(30, 40, 5, 15, 15),
		}, "sum to 35, not 30 (+5)"},
		{"overdraft", small, []Op{
			read(0, 5, -5, 25, 10),
		}, "bank/000 is overdrawn: -5"},
		{"missing account", small, []Op{
			{Kind: Read, Outcome: txnkv.OK, Balances: map[string]int64{"bank/000": 10, "bank/001": 20}},
		}, "account bank/002 is missing"},
		{"not a balance", small, []Op{
			{Kind: Read, Outcome: txnkv.OK, Balances: map[string]int64{"bank/000": 10, "bank/001": 20},
				Garbage: map[string]string{"bank/002": "x"}},
		}, `account bank/002 holds "x", not a balance`},
		{"a key that is no account", small, []Op{
			{Kind: Read, Outcome: txnkv.OK, Balances: map[string]int64{"bank/000": 10, "bank/001": 10, "bank/002": 10, "bank/9": 0}},
		}, "bank/9 is not an account"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.cfg, tc.h)
			if res.Valid() || res.First == nil {
				t.Fatalf("not caught:\n%s", res)
			}
			if !strings.Contains(strings.Join(res.First.Problems, "\n"), tc.problem) {
				t.Fatalf("problems %q, want one with %q", res.First.Problems, tc.problem)
			}
		})
	}
}

// Overdrafts are fine when the workload allows them.
func TestCheckAllowNegative(t *testing.T) {
	cfg := small
	cfg.AllowNegative = true
	if res := Check(cfg, []Op{read(0, 5, -5, 25, 10)}); !res.Valid() {
		t.Fatalf("an allowed overdraft was flagged:\n%s", res)
	}
}

// The report names the first bad read by completion, the last good read
// before it with the accounts that changed, and the transfers to suspect.
func TestCheckReportContext(t *testing.T) {
	h := []Op{
		read(3, 5, 10, 10, 10),                    // 0: last good
		xfer(6, 9, "000", "001", 3, txnkv.OK),     // 1: between the reads
		xfer(7, 100, "001", "002", 4, txnkv.Info), // 2: indeterminate, in flight
		read(200, 300, 10, 10, 11),                // 3: bad, completes last
		read(10, 20, 7, 13, 11),                   // 4: bad, completes first
		xfer(150, 160, "002", "000", 1, txnkv.OK), // 5: after the first bad read
		xfer(1, 2, "002", "000", 1, txnkv.OK),     // 6: before the last good read
	}
	res := Check(small, h)
	if res.Reads != 3 || res.Bad != 2 {
		t.Fatalf("reads %d, bad %d; want 3 and 2", res.Reads, res.Bad)
	}
	f := res.First
	if f.Index != 4 {
		t.Fatalf("first bad read is op %d, want 4 (the first to complete)", f.Index)
	}
	if f.LastGood == nil || f.LastGood.Complete != 5 {
		t.Fatalf("last good read %+v, want the one completing at 5", f.LastGood)
	}
	wantDiff := "bank/000 10 -> 7 (-3), bank/001 10 -> 13 (+3), bank/002 10 -> 11 (+1)"
	if got := strings.Join(f.Diff, ", "); got != wantDiff {
		t.Fatalf("diff %q, want %q", got, wantDiff)
	}
	if len(f.Transfers) != 2 || f.Transfers[0].Amount != 3 || f.Transfers[1].Amount != 4 {
		t.Fatalf("transfers %v, want the two running between the reads", f.Transfers)
	}
	s := res.String()
	for _, want := range []string{"first bad read, op 4", "sum to 31, not 30 (+1)", "last good read before it", "transfer 4 from bank/001 to bank/002"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
