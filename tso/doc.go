// Package tso is Shale's timestamp oracle: the one allocator of the
// cluster's timestamps (docs/versions.md, "The time source: a timestamp
// oracle").
//
// An Oracle runs on the node holding the meta range's leader lease and
// issues strictly increasing hlc timestamps from that node's hlc.Clock.
// Before it issues a timestamp whose wall time is above its persisted
// window W, it raises W through the meta range's Raft log (Meta.RaiseWindow;
// the rangesm command TSOWindow); a new oracle, on the next leaseholder,
// learns W from its own first raise and starts above it, so no timestamp
// is ever issued twice or out of order across failovers. It issues only
// while it holds the lease, checked before and after each issue, so two
// oracles never serve at once and a timestamp issued after another was
// returned is above it (real-time order).
//
// A Client is a node's way to the oracle: it keeps one call in flight;
// every request that arrives while a call is out waits for the next one,
// which asks for one timestamp per waiting request. Each request thus
// gets a timestamp issued after it arrived. Observes (a write applied
// above its timestamp moves the oracle past its version before it is
// acknowledged) share calls the same way: each call observes the highest
// version waiting. Finding the oracle (and
// following it when meta's leadership moves) is the Transport's job.
package tso
