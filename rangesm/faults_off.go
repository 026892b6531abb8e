//go:build !faults

package rangesm

// skipTxnReadValidation is the planted bug of the fault suite's
// transaction tests (faults_on.go); always off in a production build.
func skipTxnReadValidation() bool { return false }
