package client

import (
	"errors"
	"testing"
)

// A write whose earlier attempt timed out is ambiguous whatever its last
// attempt said, and matches no other kind: the fault suite once counted
// such writes as failed (errors.Is matched ErrUnavailable through the
// wrapped last error) while they had applied.
func TestMayStillApplyMatchesOnlyAmbiguous(t *testing.T) {
	last := &Error{Op: "Put", Msg: "not leader", kind: ErrUnavailable, Write: true}
	err := error(mayStillApply(last))
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("%v does not match ErrAmbiguous", err)
	}
	for _, k := range []error{ErrUnavailable, ErrInvalidArgument, ErrResourceExhausted, ErrNotFound, ErrInternal} {
		if errors.Is(err, k) {
			t.Errorf("%v matches %v as well as ErrAmbiguous", err, k)
		}
	}
	if o := mayStillApply(last).Outcome(); o != OutcomeUnknown {
		t.Errorf("Outcome = %v, want unknown", o)
	}
}
