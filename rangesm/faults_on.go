//go:build faults

package rangesm

import "sync/atomic"

// This file is compiled only into binaries built with the `faults` tag
// (the fault suite's bin/shale-faults). It holds the planted bug the
// transaction tests show their checkers catching: with
// SetSkipTxnReadValidation(true), a TxnCommit applies without checking
// its reads (txn.go), so concurrent read-modify-write transactions lose
// updates. The node sets it from PUT /debug/faults/txn
// (node/faults_on.go); every node of the cluster must agree, or their
// replicas diverge.

var skipTxnReads atomic.Bool

// SetSkipTxnReadValidation turns the planted bug on or off.
func SetSkipTxnReadValidation(on bool) { skipTxnReads.Store(on) }

// SkipTxnReadValidation reports whether the planted bug is on.
func SkipTxnReadValidation() bool { return skipTxnReads.Load() }

func skipTxnReadValidation() bool { return skipTxnReads.Load() }
