package bank

import (
	"fmt"
	"sort"
	"strings"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// maxContext bounds the transfers a report lists.
const maxContext = 30

// Result is the verdict on a bank history.
type Result struct {
	// Reads counts the ok reads checked, Bad those that broke an
	// invariant.
	Reads, Bad int
	// First is the bad read that completed first, nil when none did.
	First *BadRead
}

// Valid reports whether every read held.
func (r Result) Valid() bool { return r.Bad == 0 }

// BadRead is a read that broke an invariant, with what explains it.
type BadRead struct {
	// Index is the read's position in the history.
	Index int
	Read  Op
	// Problems says what is wrong, one invariant per line.
	Problems []string
	// LastGood is the last ok, valid read that completed before this one
	// was invoked (nil if none), and Diff how each account changed since.
	LastGood *Op
	Diff     []string
	// Transfers are the transfers that may have run between LastGood (or
	// this read, if none) and this read's completion: the ones to
	// suspect, nearest last, at most maxContext of them. Indeterminate
	// transfers are included whenever invoked before the read completed,
	// since they may take effect at any time after; failed ones are listed
	// too (a "failed" transfer that applied is one of the bugs to find).
	Transfers []Op
}

func (r Result) String() string {
	s := fmt.Sprintf("%d reads checked, %d bad", r.Reads, r.Bad)
	if r.First == nil {
		return s
	}
	var b strings.Builder
	b.WriteString(s)
	f := r.First
	fmt.Fprintf(&b, "\nfirst bad read, op %d: %s", f.Index, f.Read)
	for _, p := range f.Problems {
		b.WriteString("\n    " + p)
	}
	if f.LastGood != nil {
		fmt.Fprintf(&b, "\n  last good read before it: %s", *f.LastGood)
		if len(f.Diff) > 0 {
			b.WriteString("\n  changed since: " + strings.Join(f.Diff, ", "))
		}
	}
	fmt.Fprintf(&b, "\n  transfers that may have run in between (%d):", len(f.Transfers))
	for _, t := range f.Transfers {
		b.WriteString("\n    " + t.String())
	}
	return b.String()
}

// Check holds every ok read of h to the bank's invariants: it holds every
// account of cfg and no other key, its balances sum to cfg.Total(), and,
// unless cfg.AllowNegative, none is negative. Reads that did not complete
// ok carry nothing and are skipped.
func Check(cfg Config, h []Op) Result {
	cfg = cfg.WithDefaults()
	var res Result
	firstAt := -1
	for i, o := range h {
		if o.Kind != Read || o.Outcome != txnkv.OK {
			continue
		}
		res.Reads++
		problems := readProblems(cfg, o)
		if len(problems) == 0 {
			continue
		}
		res.Bad++
		if firstAt < 0 || o.Complete < h[firstAt].Complete {
			firstAt = i
			res.First = &BadRead{Index: i, Read: o, Problems: problems}
		}
	}
	if res.First != nil {
		explain(cfg, h, res.First)
	}
	return res
}

// readProblems lists the invariants a read breaks.
func readProblems(cfg Config, read Op) []string {
	var out []string
	balances := read.Balances
	want := map[string]bool{}
	for _, k := range cfg.Keys() {
		want[k] = true
		if g, ok := read.Garbage[k]; ok {
			out = append(out, fmt.Sprintf("account %s holds %q, not a balance", k, g))
		} else if _, ok := balances[k]; !ok {
			out = append(out, fmt.Sprintf("account %s is missing", k))
		}
	}
	var sum int64
	var keys []string
	for k, v := range balances {
		sum += v
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !want[k] {
			out = append(out, fmt.Sprintf("%s is not an account", k))
		}
		if v := balances[k]; v < 0 && !cfg.AllowNegative {
			out = append(out, fmt.Sprintf("%s is overdrawn: %d", k, v))
		}
	}
	if sum != cfg.Total() {
		out = append(out, fmt.Sprintf("the balances sum to %d, not %d (%+d)", sum, cfg.Total(), sum-cfg.Total()))
	}
	return out
}

// explain fills in the last good read and the transfers to suspect.
func explain(cfg Config, h []Op, bad *BadRead) {
	from := bad.Read.Invoke
	for _, o := range h {
		if o.Kind == Read && o.Outcome == txnkv.OK && o.Complete < bad.Read.Invoke &&
			len(readProblems(cfg, o)) == 0 && (bad.LastGood == nil || o.Complete > bad.LastGood.Complete) {
			good := o
			bad.LastGood = &good
		}
	}
	if bad.LastGood != nil {
		from = bad.LastGood.Invoke
		for _, k := range cfg.Keys() {
			was, now := bad.LastGood.Balances[k], bad.Read.Balances[k]
			if was != now {
				bad.Diff = append(bad.Diff, fmt.Sprintf("%s %d -> %d (%+d)", k, was, now, now-was))
			}
		}
	}
	for _, o := range h {
		if o.Kind != Transfer || o.Invoke >= bad.Read.Complete {
			continue
		}
		if o.Complete > from || o.Outcome == txnkv.Info {
			bad.Transfers = append(bad.Transfers, o)
		}
	}
	sort.SliceStable(bad.Transfers, func(i, j int) bool { return bad.Transfers[i].Invoke < bad.Transfers[j].Invoke })
	if n := len(bad.Transfers); n > maxContext {
		bad.Transfers = bad.Transfers[n-maxContext:]
	}
}
