package client

import (
	"context"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Committing above the commit candidate (docs/transactions.md, "Pushed
// intents: committing above C0").
//
// Each range answers its intents' provisional version p = max(C0,
// F.Next()), above C0 whenever its frontier F moved past C0 first (under
// load, most of the time). The transaction then commits at C = the
// highest p, which needs every read to hold at C:
//
//   - a point read of a key the transaction writes is covered: its
//     intent, written with the read validated, keeps every other write
//     of the key out until resolution, so the read holds at any C >= p;
//   - any other read (a key only read, a scanned span, a range only
//     read) is refreshed: validated again at C on its range, which also
//     raises the range's frontier to C so nothing lands there at or
//     below C later.
//
// The record's timestamp while STAGING is a bound S: the transaction is
// committed once every intent is in at p <= S, at the highest p, and
// recovery decides the same from the intents alone. A transaction whose
// reads are all covered stages with S = C0 + txnStageLead and commits in
// its one round whatever its intents' p (up to S); one with a read not
// covered stages at S = C0 and, an intent above C0, refreshes those reads
// at C and then stages again at S = C.

// txnStageLead is how far above C0 a transaction whose reads are all
// covered puts its staging bound. It is a bound, never waited for; it
// stays well below the 5 s after which recovery may judge a silent
// coordinator's record (node/txn_intents.go), so that recovery's
// prevention at S never lifts a frontier into the future.
const txnStageLead = time.Second

// txnCandidateFromRead is how recent the read timestamp R must be for a
// transaction whose reads are all covered to take R as its commit
// candidate C0 (candidate): well under txnStageLead, so that its intents'
// p, about the time of the commit, stay below the bound S = C0 +
// txnStageLead.
const txnCandidateFromRead = 250 * time.Millisecond

// candidate returns the commit candidate C0. A transaction whose reads
// are all covered (and that read something, recently) commits from its
// read timestamp R, without asking the oracle again: what C0 must give
// is real-time order (every transaction acknowledged before this one
// began has a version below it, which R, an oracle timestamp issued
// after this one's first read began, gives as well as a fresh one) and a
// floor for the intents' p, which the reads at R already raised every
// range's frontier to (so every p is above R anyway, and the bound S
// covers it). A transaction with a read not covered takes a fresh one:
// its intents above C0 cost it a refresh and a re-stage, and a C0 at R
// would put every intent above it.
func (tx *Tx) candidate(ctx context.Context, covered bool) (Timestamp, error) {
	if covered && !tx.rts.IsZero() && time.Since(tx.rtsAt) < txnCandidateFromRead {
		return tx.rts, nil
	}
	return tx.c.txnBegin(ctx)
}

// TxnTestingKnobs are hooks into a commit across ranges, for tests that
// make its races happen on purpose against real nodes. Each runs on the
// committing goroutine; a nil hook is skipped.
type TxnTestingKnobs struct {
	// AfterCandidate runs once C0 is taken, before anything is written.
	AfterCandidate func(c0 Timestamp)
	// BeforeRefresh runs when intents came back above a staging bound
	// of C0 and the coordinator is about to refresh its reads at c.
	BeforeRefresh func(c0, c Timestamp)
}

func (c *Client) knobs() *TxnTestingKnobs {
	if k := c.opts.TxnTestingKnobs; k != nil {
		return k
	}
	return &TxnTestingKnobs{}
}

// toRefresh returns, per range of groups, the reads not covered by the
// transaction's own writes (as groups of reads only), and whether there
// are none anywhere (every read covered).
func toRefresh(groups []*txnGroup) (refresh []*txnGroup, covered bool) {
	for _, g := range groups {
		written := make(map[string]bool, len(g.muts))
		for _, m := range g.muts {
			written[string(kvpb.MutationKey(m))] = true
		}
		var left []*kvpb.TxnRead
		for _, r := range g.reads {
			if r.GetSpan() || !written[string(r.GetKey())] {
				left = append(left, r)
			}
		}
		if len(left) > 0 {
			refresh = append(refresh, &txnGroup{desc: g.desc, reads: left})
		}
	}
	return refresh, len(refresh) == 0
}

// restage commits at ct an attempt whose intents (all in, all at or
// below ct) came back above its staging bound: the reads in refresh are
// validated again at ct, ranges in parallel, and only then is the record
// staged again at ct (recovery judges a staged transaction by its
// intents alone, so the reads must hold at ct before the record says
// so). ok false with why: the attempt did not commit (a read changed, or
// the record was no longer STAGING); err: a request failed.
func (tx *Tx) restage(ctx context.Context, id [16]byte, rk []byte, ct Timestamp, refresh []*txnGroup, intentKeys [][]byte,
	send func(g *txnGroup, ts Timestamp) txnWriteResult) (ok bool, why string, err error) {
	for _, res := range parallel(refresh, func(g *txnGroup) txnWriteResult { return send(g, ct) }) {
		if res.err != nil {
			return false, "", res.err
		}
		if !res.written {
			return false, fmt.Sprintf("read changed before the commit timestamp %s its intents were pushed to: %s", ct, res.reason), nil
		}
	}
	rec, err := tx.recordOp(ctx, id, rk, &kvpb.TxnRecordRequest{Op: kvpb.TxnRecordOp_TXN_RECORD_STAGE,
		Timestamp: toProto(ct), HeartbeatUnixNanos: time.Now().UnixNano(), Keys: intentKeys})
	if err != nil {
		return false, "", err
	}
	if ts, err := fromProto(rec.GetTimestamp()); rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_STAGING || err != nil || ts != ct {
		return false, fmt.Sprintf("its record was %v at %s when it re-staged at %s (pushed by a reader that took its coordinator for gone)",
			rec.GetStatus(), FormatTimestamp(ts), ct), nil
	}
	return true, "", nil
}
