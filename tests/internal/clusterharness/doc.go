// Package clusterharness holds what the multi-process test suites (tests/
// and tests/jepsen/) share to run real shale processes: a process's life
// (start and wait for health, SIGKILL, SIGTERM, SIGSTOP/SIGCONT, its log),
// ports held on loopback addresses and the listeners a node inherits on
// them, and log tails for failure messages.
// Each suite keeps its own cluster type on top: what a cluster is, how it
// bootstraps and what a test asks of it differ between them.
package clusterharness
