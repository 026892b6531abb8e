package bank

import (
	"fmt"
	"sort"
	"strings"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// Config is the bank: its accounts and the transfers drawn on it. Zero
// fields take the defaults noted.
type Config struct {
	// KeyPrefix starts every account's key (default "bank/").
	KeyPrefix string
	// Accounts is the number of accounts (default 20).
	Accounts int
	// Initial is every account's opening balance (default 100).
	Initial int64
	// MaxTransfer bounds a transfer's amount, drawn from 1 to it
	// (default 10).
	MaxTransfer int64
	// ReadShare is the share of whole-bank reads among operations
	// (default 0.25).
	ReadShare float64
	// AllowNegative lets a transfer overdraw its source. When false (the
	// default) a transfer larger than the source's balance aborts, and a
	// negative balance in a read is a violation.
	AllowNegative bool
}

// SplitKeys returns the key of every every-th account but the first
// (accounts every, 2*every, ...): the split points that spread the bank
// over ranges of every accounts each. Empty when every < 1.
func (c Config) SplitKeys(every int) []string {
	c = c.WithDefaults()
	if every < 1 {
		return nil
	}
	keys := c.Keys()
	var out []string
	for i := every; i < len(keys); i += every {
		out = append(out, keys[i])
	}
	return out
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "bank/"
	}
	if c.Accounts <= 0 {
		c.Accounts = 20
	}
	if c.Initial <= 0 {
		c.Initial = 100
	}
	if c.MaxTransfer <= 0 {
		c.MaxTransfer = 10
	}
	if c.ReadShare <= 0 || c.ReadShare > 1 {
		c.ReadShare = 0.25
	}
	return c
}

// Keys returns the accounts' keys, in order.
func (c Config) Keys() []string {
	c = c.WithDefaults()
	keys := make([]string, c.Accounts)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%03d", c.KeyPrefix, i)
	}
	return keys
}

// Total is the money in the bank, which no transfer changes.
func (c Config) Total() int64 {
	c = c.WithDefaults()
	return int64(c.Accounts) * c.Initial
}

// OpKind is what an operation does.
type OpKind string

const (
	// Transfer moves Amount from From to To, in one transaction.
	Transfer OpKind = "transfer"
	// Read reads every account's balance, in one transaction.
	Read OpKind = "read"
)

// Op is one recorded operation. Times are in one clock, only compared.
type Op struct {
	Process int           `json:"process"`
	Kind    OpKind        `json:"f"`
	Outcome txnkv.Outcome `json:"type"`
	From    string        `json:"from,omitempty"`
	To      string        `json:"to,omitempty"`
	Amount  int64         `json:"amount,omitempty"`
	// Locking: the transfer read its two accounts with locking reads
	// (txnkv.LockingTx, where the Tx has them), in From, To order.
	Locking bool `json:"locking,omitempty"`
	// Balances is what an ok Read returned: every account found, by key.
	Balances map[string]int64 `json:"balances,omitempty"`
	// Garbage is what an ok Read found in accounts that did not hold a
	// balance (a number), by key.
	Garbage  map[string]string `json:"garbage,omitempty"`
	Invoke   int64             `json:"invoke"`
	Complete int64             `json:"complete"`
	Err      string            `json:"error,omitempty"`
}

func (o Op) String() string {
	var what string
	if o.Kind == Transfer {
		what = fmt.Sprintf("transfer %d from %s to %s", o.Amount, o.From, o.To)
	} else {
		what = "read"
		if o.Outcome == txnkv.OK {
			what += " " + formatBalances(o.Balances)
		}
	}
	s := fmt.Sprintf("process %d, %s, %d..%d: %s", o.Process, o.Outcome, o.Invoke, o.Complete, what)
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	return s
}

func formatBalances(b map[string]int64) string {
	keys := make([]string, 0, len(b))
	var sum int64
	for k, v := range b {
		keys = append(keys, k)
		sum += v
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, b[k])
	}
	return fmt.Sprintf("{%s} total %d", strings.Join(parts, " "), sum)
}
