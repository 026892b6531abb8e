package client

// DefaultBackupBytesPerSecond is the export rate shalectl backup create
// uses unless --rate is given (docs/backup.md, "Throttling", has the
// reasoning). It is a fixed rate, not one fitted to a node's load:
//
//   - Floor: a range up to the split size (64 MiB) must export within one
//     attempt (5 minutes in shalectl), which needs about 224 KB/s; 4 MiB/s
//     exports such a range in 16 s, a margin of about 19× for slow disks,
//     retries within the attempt and the SST file's write and fsync.
//   - Ceiling: ranges are exported one at a time, so the rate is the
//     cluster's whole backup load: one leader reading 4 MiB/s of keys and
//     values through its engine and writing about as much to the backup
//     directory. That is a small share of a local disk's sequential
//     bandwidth (hundreds of MB/s) and of one of a node's two cores; an
//     unthrottled export runs as fast as a core allows and competes with
//     the leader's Raft log writes and foreground requests for both.
//
// Whether it keeps foreground p99 within 1.5× of its level without a
// backup on a given machine is what `make bench-backup` measures
// (docs/benchmarks.md, "Backup and foreground latency"); an operator with
// spare disk and CPU raises it with --rate, or lifts it with --rate 0.
const DefaultBackupBytesPerSecond = 4 << 20
