// Package concurrency holds coordination recipes built on Shale's leases
// (like etcd's clientv3/concurrency): a Session, a lease its holder keeps
// alive, a Mutex with fencing tokens, and an Election of one leader.
//
// Guarantees (docs/leases.md, "Locks"): a Mutex is held by at most one
// session whose lease is alive. A holder whose lease ended (its process
// paused or cut off longer than the TTL) may still believe it holds the
// lock, so anything the lock protects must check the holder's fencing
// token: tokens grow with every new holder, and a store that refuses
// writes with a token below the highest it has seen refuses the old
// holder's.
//
// An Election is led by at most one session whose lease is alive; its
// leaders follow each other in the order of their keys' create versions
// (Rev), which serve as fencing tokens the same way (docs/leases.md,
// "Elections").
package concurrency
