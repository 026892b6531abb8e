package node

import (
	"strings"
	"testing"
	"time"
)

// TestGCOptionsDefaults: zero fields take the documented defaults, and a
// retention below the minimum or a negative bound is refused with an
// error naming it.
func TestGCOptionsDefaults(t *testing.T) {
	var o GCOptions
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	if o.Retention != DefaultRetention || o.Interval != time.Minute || o.MaxDeletesPerCommand != 1000 || o.MaxKeysPerCommand != 10000 {
		t.Fatalf("defaults: %+v", o)
	}
	o = GCOptions{Retention: 5 * time.Second}
	if err := o.setDefaults(); err != nil || o.Interval != time.Second {
		t.Fatalf("5s retention: %+v, %v", o, err)
	}
	for _, bad := range []GCOptions{
		{Retention: 500 * time.Millisecond},
		{Retention: -time.Minute},
		{Interval: -time.Second},
		{MaxDeletesPerCommand: -1},
	} {
		o := bad
		err := o.setDefaults()
		if err == nil || !strings.Contains(err.Error(), "GC") {
			t.Errorf("%+v: err = %v, want a GC options error", bad, err)
		}
	}
}
