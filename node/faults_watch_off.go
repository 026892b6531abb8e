//go:build !faults

package node

// dropFirstLiveWatchEvent is the planted watch bug of the test build
// (faults_watch_on.go): never here.
func dropFirstLiveWatchEvent() bool { return false }
