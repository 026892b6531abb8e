// Package listappend checks histories of list-append transactions for the
// anomalies of Adya's isolation levels, after Elle (Kingsbury and Alvaro,
// "Elle: Inferring Isolation Anomalies from Experimental Observations",
// VLDB 2020), and generates such transactions for the fault suite.
//
// Each key holds a list; a transaction appends unique elements to keys and
// reads whole lists. Because a list keeps its whole past, a read of
// [1 2 3] says that 1, 2 and 3 were installed in that order, so the version
// order of each key can be read off the history instead of guessed: the
// longest read is the order, and every other read must be a prefix of it.
// From the orders the checker builds the dependency graph of the committed
// transactions (Adya's ww, wr and rw edges, plus real-time edges when
// strict serializability is asked for), finds its strongly connected
// components (Tarjan), and inside each one searches for the shortest cycle
// of each class, restricting the search to the edge types the class
// allows. Each anomaly comes with the transactions and a sentence per edge
// saying which read or write proves it.
//
// What each report proves (see AnomalyType for the list):
//   - A cycle of ww edges (G0), of ww and wr edges (G1c), with one rw edge
//     (G-single) or more (G2-item) cannot occur in a serializable history:
//     no serial order puts every transaction after its predecessors.
//     A cycle that needs real-time edges (the -realtime classes) rules out
//     strict serializability only: some transaction took effect outside
//     the interval between its invocation and its completion.
//   - G1a (a failed transaction's append read), G1b (a read that ends in an
//     append some transaction later superseded inside itself), and
//     incompatible orders (two reads of a key that are not prefixes of one
//     another) need no cycle: each alone rules out read committed, or any
//     list at all.
//   - Duplicate elements (one append applied twice), garbage reads
//     (an element nobody appended) and internal inconsistencies (a
//     transaction not seeing its own appends) break the data type itself.
//   - Duplicate appends (two appends of one element to one key) are a bug
//     of the workload: they make the inference unsound, so they are
//     reported rather than trusted.
//
// Indeterminate (:info) transactions may or may not have committed. Their
// reads are unknown and ignored. One whose append some read observed did
// commit, so it joins the graph with its writes; one never observed is
// left out, since it may never have happened. It has no completion time,
// so it never precedes anything in real time. Failed transactions never
// join the graph; an observed append of one is G1a.
//
// Like Elle, the checker is sound but not complete: every anomaly it
// reports is real (given unique appends), but a history can hide anomalies
// it cannot see, for instance in appends no read observed.
//
// Workload generates transactions (Generator), runs them through a Runner
// (any transactional client; KVRunner adapts a txnkv.Txner by storing each
// list as one value) and records the history for Check.
package listappend
