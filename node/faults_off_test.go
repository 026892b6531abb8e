//go:build !faults

package node

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/storage"
)

// TestDefaultBuildRefusesFaults: a binary built without the faults tag
// answers 404 on every fault endpoint and method, and its engine has no
// fault layer to drive even from inside the process.
func TestDefaultBuildRefusesFaults(t *testing.T) {
	tn := startNode(t, "", Config{})
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPost} {
		code, body := httpDo(t, method, "http://"+tn.httpAddr+"/debug/faults/disk?ops=sync&delay=100ms")
		if code != http.StatusNotFound || !strings.Contains(body, "not built into this binary") {
			t.Errorf("%s /debug/faults/disk = %d %q, want 404 saying it is not built", method, code, body)
		}
	}
	if err := tn.n.db.SetIODelay(storage.IOSync, time.Millisecond, 0); !errors.Is(err, storage.ErrNotSupported) {
		t.Errorf("SetIODelay on a default build's engine = %v, want ErrNotSupported", err)
	}
	put(t, tn, "k", "v")
}
