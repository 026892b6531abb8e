package txnkv

import "errors"

// Outcome is how a transaction ended, as the client saw it (Jepsen's
// :ok, :fail and :info).
type Outcome uint8

const (
	// OK: the transaction committed; its reads are what it observed.
	OK Outcome = iota
	// Fail: the transaction definitely did not commit; none of its writes
	// may ever be observed.
	Fail
	// Info: indeterminate; the transaction may or may not have committed
	// (a timeout, a broken connection, an ambiguous commit). Its reads
	// are unknown.
	Info
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Fail:
		return "fail"
	case Info:
		return "info"
	}
	return "outcome(?)"
}

// MarshalText writes the outcome as Jepsen's names, for JSON histories.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads the names MarshalText writes.
func (o *Outcome) UnmarshalText(b []byte) error {
	switch string(b) {
	case "ok":
		*o = OK
	case "fail":
		*o = Fail
	case "info":
		*o = Info
	default:
		return errors.New("txnkv: unknown outcome " + string(b))
	}
	return nil
}

// Classifier maps the error a Txner returned to an outcome. It is given
// only non-nil errors that did not come from the workload's own function.
type Classifier func(err error) Outcome

// Classify is the safe default Classifier: every error is indeterminate,
// since nothing in a bare error promises the commit did not happen. A
// client whose errors say "not applied" (as Shale's ErrUnavailable does for
// single operations) supplies a sharper Classifier; a sharper one finds
// more (a failed transaction's writes may never be seen), a wrong one
// reports anomalies that are not there.
func Classify(error) Outcome { return Info }
