package client_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shaledb/shale/client"
)

// TestNewErrorOutsideThePackage builds every kind of error from outside
// the package, as an application's tests would, and checks errors.Is and
// the documented write outcome of each.
func TestNewErrorOutsideThePackage(t *testing.T) {
	cases := []struct {
		kind  error
		write bool
		want  client.Outcome
	}{
		{client.ErrInvalidArgument, true, client.NotApplied},
		{client.ErrUnavailable, true, client.NotApplied},
		{client.ErrAmbiguous, true, client.OutcomeUnknown},
		{client.ErrResourceExhausted, true, client.NotApplied},
		{client.ErrInternal, true, client.OutcomeUnknown},
		{client.ErrInternal, false, client.NotApplied},
		{client.ErrNotFound, true, client.NotApplied},
		{client.ErrClosed, true, client.NotApplied},
		{client.ErrBatchSpansRanges, true, client.NotApplied},
		{client.ErrPermissionDenied, true, client.NotApplied},
	}
	for _, tc := range cases {
		e := client.NewError(tc.kind, "Put", "test")
		e.Write = tc.write
		var err error = fmt.Errorf("wrapped: %w", e)
		var got *client.Error
		if !errors.Is(err, tc.kind) || !errors.As(err, &got) || got.Kind() != tc.kind {
			t.Fatalf("NewError(%v) does not match its kind through wrapping", tc.kind)
		}
		if got.Outcome() != tc.want {
			t.Fatalf("%v (write %v): Outcome %v, want %v", tc.kind, tc.write, got.Outcome(), tc.want)
		}
	}
	if e := client.NewError(errors.New("not a sentinel"), "Get", "x"); !errors.Is(e, client.ErrInternal) {
		t.Fatalf("NewError of an unknown kind = %v, want ErrInternal", e.Kind())
	}
}
