//go:build !faults

package node

import "net/http"

// A binary built without the `faults` tag (every production build) carries
// no way to inject faults: its engine is opened without the fault layer and
// /debug/faults/ answers 404, saying why. faults_on.go is the test build.

// faultInjectionBuilt: this binary carries the fault endpoints.
const faultInjectionBuilt = false

type faultState struct{}

func (n *Node) registerFaultHandlers(mux *http.ServeMux) {
	mux.HandleFunc("/debug/faults/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "fault injection is not built into this binary (it is only in test builds: go build -tags faults)", http.StatusNotFound)
	})
}

// dropExportEntry is the planted export bug of the test build: never here.
func (n *Node) dropExportEntry(uint64) bool { return false }

// leaseKeepAliveIgnored is the planted lease bug of the test build: never
// here.
func (n *Node) leaseKeepAliveIgnored() bool { return false }

// gcIgnoresProtections is the planted protection bug of the test build:
// never here.
func (n *Node) gcIgnoresProtections() bool { return false }

// deadlocksIgnored is the planted deadlock bug of the test build: never
// here.
func (n *Node) deadlocksIgnored() bool { return false }
