package rangesm

import (
	"fmt"

	"github.com/shaledb/shale/command"
)

// One-range transaction commit (docs/transactions.md, "One range: one
// proposal, no transaction record").
//
// A TxnCommit carries the transaction's read timestamp R, the keys and
// spans it read on this range (each read served at R, so on a replica
// whose frontier F had reached R) and its writes. At apply time, on every
// replica alike:
//
//   - if any key read has a version above R (a version in (R, F]: F is
//     above every version of the range), what the transaction read has
//     changed since its snapshot: the command fails with CodeReadChanged
//     and writes nothing, and the client runs the transaction again;
//   - otherwise the writes apply as a batch does, at v = max(T, F.Next()).
//     Nothing read changed in (R, F] and no version lies in (F, v), so the
//     reads still hold at v: the transaction takes effect at the one
//     instant v.
//
// A read timestamp below the GC threshold fails the same way: versions
// below the threshold may be gone, so the check could miss a change.

// applyTxnCommit validates a one-range transaction's reads and applies
// its writes.
// REQUIRES: the replica's raftMu.
func (r *Range) applyTxnCommit(cmd *command.Command) (command.Result, error) {
	if res, ok := r.checkTxnKeys(cmd); !ok {
		return res, nil
	}
	t := &cmd.Txn
	// An intent on a key read came after the read (which would have
	// met it otherwise): the transaction may commit below this one's
	// version, so the read may have changed; an intent on a key written
	// keeps every other write of it out.
	if res, ok, err := r.readsConflict(t.Reads, nil); err != nil || !ok {
		return res, err
	}
	if res, ok, err := r.mutationsConflict(cmd.Mutations, nil); err != nil || !ok {
		return res, err
	}
	if len(t.Reads) > 0 && !skipTxnReadValidation() {
		if res, ok, err := r.validateTxnReads(t); err != nil || !ok {
			return res, err
		}
	}
	return r.applyMutations(cmd)
}

// validateTxnReads checks that nothing t read changed after its read
// timestamp; ok is false with the rejection when something did.
// REQUIRES: the replica's raftMu.
func (r *Range) validateTxnReads(t *command.TxnCommit) (command.Result, bool, error) {
	rts := t.ReadTimestamp
	if rts.Less(r.st.gcThreshold) {
		return command.Result{Code: command.CodeReadChanged,
			Message: fmt.Sprintf("the read timestamp %s is below range %d's GC threshold %s", rts, r.rangeID, r.st.gcThreshold)}, false, nil
	}
	if r.st.frontier.Less(rts) {
		// Every read at R closed R on the range first (or found F past
		// it), and F never falls: a frontier below R means these reads
		// were not served here at R.
		return command.Result{Code: command.CodeMalformed,
			Message: fmt.Sprintf("the read timestamp %s is above range %d's frontier %s: the reads were not served at it", rts, r.rangeID, r.st.frontier)}, false, nil
	}
	w := r.writer()
	for _, rd := range t.Reads {
		var end []byte
		if rd.Span && len(rd.End) > 0 {
			end = rd.End
		}
		ch, found, err := w.ChangedAbove(rd.Key, end, !rd.Span, rts)
		if err != nil {
			return command.Result{}, false, fmt.Errorf("TxnCommit read validation at %s: %w", rts, err)
		}
		if found {
			return command.Result{Code: command.CodeReadChanged, Value: ch.Key,
				Message: fmt.Sprintf("key %q was written at %s, after the transaction's snapshot %s", ch.Key, ch.Version, rts)}, false, nil
		}
	}
	return command.Result{}, true, nil
}
