// Package bench drives a running cluster with a timed workload from many
// concurrent clients and reports throughput and latency percentiles. It is
// the engine of `shalectl bench`.
//
// The same workload runs against Shale (through the client package) or
// against etcd (through etcd's own Go client), so that the two can be
// compared side by side on one machine with one tool. A workload never
// knows which system it drives: it sees only the Driver interface.
//
// A run has three phases: open Config.Conns drivers (connections), load the
// data the workload reads (untimed), then run Config.Clients workers for
// Config.Duration, each issuing one request at a time. Every request's
// latency goes into an HDR histogram per operation kind; a progress line is
// written every second; Report holds the result.
package bench
