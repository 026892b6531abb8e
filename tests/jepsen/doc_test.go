// Package jepsen verifies that Shale is linearizable and loses no
// acknowledged write while a nemesis injects the faults a real cluster
// meets: partitions, crashes, pauses, leadership and membership changes,
// splits and merges.
//
// Every run starts an empty multi-process cluster of real shale binaries on
// loopback addresses 127.0.26.x, drives it with concurrent workers through
// the Go client, records each operation with its invoke and complete times
// and its outcome (ok, failed definitely, or indeterminate), and checks the
// history afterwards: the register workload with porcupine (one history per
// key), the set workload by reading everything back, the transactional
// workloads (bank and list-append through client.Txn) with their
// checkers (txn_workload_test.go), watchers of the set's and a hot-key
// writer's keys against the write history (watch_check_test.go), lease
// sessions against the lease rules (lease_check_test.go), holders of a
// mutex against each other with fencing tokens (lock_check_test.go),
// campaigners and an observer of an election (elect_check_test.go), and a
// backup taken during the run by restoring it into a fresh cluster and comparing it
// with the set's state at the backup's timestamp (the backup holds a
// protected timestamp; TestProtectionCheckCatchesPlantedBug checks that
// GC honours it). A run counts only when
// its validity conditions hold (see validity_test.go).
//
// TestChaosShort runs in `make test`; TestChaos runs every nemesis for
// $SHALE_CHAOS_TIME each (`make chaos`). $SHALE_CHAOS_SEED replays a fault
// schedule; $SHALE_ARTIFACTS is where failing histories are written.
// docs/testing.md describes the method and the last long run.
//
// The whole package is test code (like tests/): it runs only under go test.
package jepsen
