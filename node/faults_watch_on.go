//go:build faults

package node

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// A planted bug for the fault suite's watch checker (test builds only):
// while watch-drop is set (PUT /debug/faults/watch-drop, DELETE to clear),
// every watch stream this node serves leaves out the first change it
// would send from the feed after its history read: the event lost in a
// registration race, which the checker must report as never delivered.
var watchDropFirstLive atomic.Bool

// setWatchDrop plants (PUT) or removes (DELETE) the watch bug.
func (n *Node) setWatchDrop(w http.ResponseWriter, r *http.Request) {
	on := r.Method == http.MethodPut
	watchDropFirstLive.Store(on)
	n.log.Warn("fault injection: watch streams drop their first live event", "on", on)
	fmt.Fprintf(w, "watch-drop %v\n", on)
}

// dropFirstLiveWatchEvent says whether a stream leaves out its first live
// change (the planted bug).
func dropFirstLiveWatchEvent() bool { return watchDropFirstLive.Load() }
