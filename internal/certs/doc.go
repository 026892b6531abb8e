// Package certs creates and reads the X.509 certificates of a Shale
// cluster: one cluster CA, a certificate per node and one per client.
//
// Every key is ECDSA P-256. A certificate says what its holder may do in
// its subject's OrganizationalUnit, which the CA signs with the rest:
//
//	OU "shale-node"             a node: may join, carry Raft traffic and
//	                            snapshots, and forward admin requests
//	OU "shale-role:admin"       a client with every right
//	OU "shale-role:read-write"  a client that reads and writes keys
//	OU "shale-role:read-only"   a client that only reads
//
// Node certificates carry both the server and the client extended key
// usages (a node dials its peers); client certificates only the client
// one, so a client certificate can never serve as a node's.
//
// It uses the standard library only, so that both the server and
// shalectl can use it.
package certs
