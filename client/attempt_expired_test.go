package client

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The node can end a call at the attempt's deadline a moment before the
// client's own timer fires; that is still the attempt timing out, to be
// retried, not the node's final answer (TestClientStatusOfPausedNode
// failed on it under load).
func TestAttemptExpired(t *testing.T) {
	ctx := context.Background()
	soon, cancelSoon := context.WithTimeout(ctx, attemptDeadlineSlack/2)
	defer cancelSoon()
	later, cancelLater := context.WithTimeout(ctx, time.Minute)
	defer cancelLater()
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	rst := status.Error(codes.Canceled, "stream terminated by RST_STREAM with error code: CANCEL")
	for _, tc := range []struct {
		name      string
		actx, ctx context.Context
		err       error
		want      bool
	}{
		{"node ended the call at the attempt's deadline", soon, ctx, rst, true},
		{"node's deadline error at the attempt's deadline", soon, ctx, status.Error(codes.DeadlineExceeded, "deadline"), true},
		{"node cancelled long before the deadline", later, ctx, rst, false},
		{"another error at the deadline", soon, ctx, status.Error(codes.Unavailable, "down"), false},
		{"the request's own deadline passed", soon, done, rst, false},
		{"no error", soon, ctx, nil, false},
	} {
		if got := attemptExpired(tc.actx, tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: attemptExpired = %v, want %v", tc.name, got, tc.want)
		}
	}
}
