// Package command defines the commands Shale writes into Raft logs and the
// results their application produces.
//
// It is the format both layers above it share, and it imports neither:
// proposers (node/, and raft/ for the splits, merges, replica changes and
// meta updates it coordinates) build commands and read results; the range
// state machine (rangesm/) decodes and evaluates them
// (docs/architecture.md, "Layers").
//
// A command is evaluated at apply time: every replica decodes it and
// evaluates it deterministically against its own applied state (a CAS reads
// the key it compares while applying), so proposing needs no latches. The
// encoding is therefore part of the on-disk format: an entry written today
// sits in a Raft log, and may be re-applied after a restart or sent to a new
// replica, for as long as the log keeps it. It is versioned, and every tag
// and code below is frozen.
//
//	command   := version:u8 header kind:u8 body
//	version   := 0x02 (0x01 is still read, see below)
//	header    := proposer_node:uvarint proposal_id:uvarint
//	             client_id:uvarint request_seq:uvarint proposer_time:fixed64
//	             timestamp
//	timestamp := wall:uint64 big-endian logical:uint32 big-endian (hlc.Encode)
//	body      := put | delete | delete_range | batch | cas | dedup_gc
//	           | put_node | put_descriptor | change_replicas | remove_node
//	           | split | alloc_range_id | put_descriptors | freeze
//	           | unfreeze | merge | merge_abort | close | gc | txn_commit
//	           | lease_grant | lease_revoke | lease_attach | lease_swept
//	           | lease_put | lease_delete | txn_write | txn_resolve
//	           | txn_record | tso_window | txn_prevent | lease_batch
//	           | lease_cas | protect | release
//	put            := key:bytes value:bytes                          (kind 1)
//	delete         := key:bytes                                      (kind 2)
//	delete_range   := start:bytes end:bytes                          (kind 3)
//	batch          := count:uvarint mutation{count}                  (kind 4)
//	mutation       := kind:u8 (put | delete | delete_range)
//	cas            := flags:u8 key:bytes expected:bytes new_value:bytes
//	                  [expected_version:timestamp if flags bit 2]    (kind 5)
//	                  flags: bit 0 expect_absent, bit 1 delete,
//	                  bit 2 expect_version (version 2 only)
//	dedup_gc       := (empty; proposer_time is the GC clock)         (kind 6)
//	put_node       := node:bytes (kvpb.NodeDescriptor, protobuf)     (kind 7)
//	put_descriptor := desc:bytes (kvpb.RangeDescriptor, protobuf)    (kind 8)
//	change_replicas:= expected_generation:uvarint desc:bytes         (kind 9)
//	remove_node    := node_id:uvarint                                (kind 10)
//	split          := expected_generation:uvarint left:bytes right:bytes (kind 11)
//	                  (left and right: kvpb.RangeDescriptor, protobuf)
//	alloc_range_id := (empty)                                        (kind 12)
//	put_descriptors:= count:uvarint desc:bytes{count}                (kind 13)
//	freeze         := expected_generation:uvarint left_range_id:uvarint
//	                  left_generation:uvarint                        (kind 14)
//	unfreeze       := left_range_id:uvarint left_generation:uvarint  (kind 15)
//	merge          := expected_generation:uvarint freeze_index:uvarint
//	                  right:bytes (kvpb.RangeDescriptor, protobuf)   (kind 16)
//	merge_abort    := expected_generation:uvarint right_range_id:uvarint (kind 17)
//	close          := timestamp                                      (kind 18)
//	gc             := threshold:timestamp start:bytes end:bytes
//	                  max_deletes:uvarint max_keys:uvarint           (kind 19)
//	                  (end empty: the range's end)
//	txn_commit     := read_ts:timestamp count:uvarint read{count}
//	                  count:uvarint mutation{count}                  (kind 20)
//	                  (read_ts zero only without reads)
//	read           := flags:u8 start:bytes [end:bytes if flags bit 0]
//	                  (no bit 0: the point key start; bit 0: the span
//	                  [start, end), an empty end the key space's end)
//	lease_grant    := id:uvarint ttl_ms:uvarint                      (kind 21)
//	                  (id 0: the meta range allocates one)
//	lease_revoke   := id:uvarint flags:u8 [term:uvarint if flags bit 1] (kind 22)
//	                  flags: bit 0 expired (else revoked by a client),
//	                  bit 1 term: refused unless appended in that Raft term
//	lease_attach   := id:uvarint key:bytes                           (kind 23)
//	lease_swept    := id:uvarint                                     (kind 24)
//	lease_put      := id:uvarint deadline:timestamp key:bytes value:bytes (kind 25)
//	lease_delete   := id:uvarint count:uvarint key:bytes{count}      (kind 26)
//	txn_write      := txn_id:16 bytes record:bytes read_ts:timestamp
//	                  count:uvarint read{count}
//	                  count:uvarint mutation{count}                  (kind 27)
//	                  [bound:timestamp heartbeat:fixed64 count:uvarint
//	                   key:bytes{count}: the folded stage, kind 34 only]
//	                  (kinds 35 and 36: docs/formats.md)
//	                  (mutations: put and delete only, none on a range
//	                  the transaction only read; read_ts zero only
//	                  without reads)
//	txn_resolve    := txn_id:16 bytes flags:u8
//	                  [commit_ts:timestamp if flags bit 0]
//	                  count:uvarint key:bytes{count}                 (kind 28)
//	                  flags: bit 0 committed (else aborted)
//	txn_record     := txn_id:16 bytes op:u8 record_key:bytes
//	                  timestamp heartbeat:fixed64
//	                  count:uvarint key:bytes{count}                 (kind 29)
//	                  op: 1 stage, 2 commit, 3 abort, 4 heartbeat,
//	                  5 delete (fields an op does not use are empty)
//	tso_window     := window:fixed64 (Unix nanoseconds)               (kind 30)
//	txn_prevent    := txn_id:16 bytes timestamp
//	                  count:uvarint key:bytes{count}                 (kind 31)
//	lease_batch    := count:uvarint lmutation{count}                 (kind 32)
//	lmutation      := kind:u8 (put | delete | delete_range | leased_put)
//	leased_put     := id:uvarint deadline:timestamp key:bytes value:bytes
//	                  (mutation kind 25; at least one in a lease_batch)
//	lease_cas      := id:uvarint deadline:timestamp cas              (kind 33)
//	                  (cas without its delete flag)
//	protect        := id:uvarint timestamp start:bytes end:bytes
//	                  expiry:fixed64 window:uvarint description:bytes (kind 40)
//	                  (id 0: create, meta allocates the ID; else refresh
//	                  that record's expiry; protect.go)
//	release        := id:uvarint flags:u8 [expired_by:fixed64 if flags bit 0]
//	                                                                 (kind 41)
//	                  flags: bit 0 only if the record expired by then
//	bytes     := len:uvarint byte{len}
//
// uvarint is encoding/binary's unsigned LEB128; fixed64 is little-endian
// (proposer_time is an int64, Unix nanoseconds). Keys are user keys, without
// the engine's 0x03 prefix. A command must be consumed exactly: trailing
// bytes are malformed.
//
// The header's timestamp is the proposal timestamp T: a write applies at
// version max(T, F.Next()) where F is the range's frontier (rangesm's
// mvcc_state.go). A version 1 command has no timestamp field; it is read
// with T's wall time = proposer_time (logical 0), and close, gc and the
// expect_version flag, do not exist in it.
//
// change_replicas never appears in an EntryNormal: it is the Context of the
// ConfChangeV2 it describes, so the descriptor change and the Raft
// configuration change are one log entry.
package command

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
)

// Version is the encoding version this package writes. DO NOT CHANGE the
// meaning of a version once released; a new layout gets a new version and
// the decoder keeps reading the old ones.
const Version byte = 0x02

// version1 is the layout without the header timestamp, still decoded.
const version1 byte = 0x01

// Kind is the operation a command performs. DO NOT CHANGE the values: they
// are stored in Raft logs.
type Kind uint8

const (
	KindPut            Kind = 1
	KindDelete         Kind = 2
	KindDeleteRange    Kind = 3
	KindBatch          Kind = 4
	KindCAS            Kind = 5
	KindDedupGC        Kind = 6
	KindPutNode        Kind = 7
	KindPutDescriptor  Kind = 8
	KindChangeReplicas Kind = 9
	KindRemoveNode     Kind = 10
	KindSplit          Kind = 11
	KindAllocRangeID   Kind = 12
	KindPutDescriptors Kind = 13
	KindFreeze         Kind = 14
	KindUnfreeze       Kind = 15
	KindMerge          Kind = 16
	KindMergeAbort     Kind = 17
	KindClose          Kind = 18
	KindGC             Kind = 19
	// KindTxnCommit commits a transaction whose reads and writes lie in
	// one range, in one proposal (docs/transactions.md, "One range"): it
	// fails with CodeReadChanged, writing nothing, when a key it read has
	// a version above its read timestamp; otherwise it applies its
	// mutations as a batch does.
	KindTxnCommit Kind = 20
	// Leases (docs/leases.md): grant, revoke, attach and swept are meta
	// commands on the lease records; put and delete write user keys.
	KindLeaseGrant  Kind = 21
	KindLeaseRevoke Kind = 22
	KindLeaseAttach Kind = 23
	KindLeaseSwept  Kind = 24
	KindLeasePut    Kind = 25
	KindLeaseDelete Kind = 26
	// KindTxnWrite writes a transaction's intents on one range of a
	// transaction across ranges (docs/transactions.md, "Several ranges").
	KindTxnWrite Kind = 27
	// KindTxnResolve turns a finished transaction's intents on one range
	// into versions (committed) or drops them (aborted).
	KindTxnResolve Kind = 28
	// KindTxnRecord changes a transaction record (on the range holding
	// its record key): stage, commit, abort, heartbeat, delete.
	KindTxnRecord Kind = 29
	// KindTSOWindow raises the timestamp oracle's persisted window (meta
	// range only; docs/versions.md, "How the oracle works"). Kinds 18-29
	// are left for the range state machine's own commands.
	KindTSOWindow Kind = 30
	// KindTxnPrevent is recovery's check of a staging transaction's
	// intents on one range: present at or below the staging timestamp,
	// or made impossible there (docs/transactions.md).
	KindTxnPrevent Kind = 31
	// KindLeaseBatch is a batch with puts attached to leases (each with
	// its lease and attach window, like KindLeasePut); KindLeaseCAS a
	// compare-and-swap whose new value is attached to a lease.
	KindLeaseBatch Kind = 32
	KindLeaseCAS   Kind = 33
	// wireTxnWriteStaged is the kind byte of a KindTxnWrite that stages
	// its record (TxnWrite.Stage): decoded, and peeked, as KindTxnWrite.
	wireTxnWriteStaged Kind = 34
	// wireTxnWriteFolded is the kind byte of a KindTxnWrite carrying
	// resolutions of committed transactions (TxnWrite.Resolve), staged
	// or not: decoded, and peeked, as KindTxnWrite.
	wireTxnWriteFolded Kind = 35
	// wireTxnWriteCarried is wire kind 35 whose folded resolutions each
	// end with a record key, empty or that of a record the fold marks
	// COMMITTED first (TxnResolve.Record: the COMMITTED carried by the
	// write), followed by the IDs of finished records to delete
	// (TxnWrite.DeleteRecords), with at least one fold or deletion:
	// decoded, and peeked, as KindTxnWrite.
	wireTxnWriteCarried Kind = 36
	// KindProtect and KindRelease create (or refresh) and remove a
	// protected timestamp record (meta range only; protect.go,
	// docs/versions.md "Protected timestamps").
	KindProtect Kind = 40
	KindRelease Kind = 41
)

func (k Kind) String() string {
	switch k {
	case KindPut:
		return "Put"
	case KindDelete:
		return "Delete"
	case KindDeleteRange:
		return "DeleteRange"
	case KindBatch:
		return "Batch"
	case KindCAS:
		return "CAS"
	case KindDedupGC:
		return "DedupGC"
	case KindPutNode:
		return "PutNode"
	case KindPutDescriptor:
		return "PutDescriptor"
	case KindChangeReplicas:
		return "ChangeReplicas"
	case KindRemoveNode:
		return "RemoveNode"
	case KindSplit:
		return "Split"
	case KindAllocRangeID:
		return "AllocRangeID"
	case KindPutDescriptors:
		return "PutDescriptors"
	case KindFreeze:
		return "Freeze"
	case KindUnfreeze:
		return "Unfreeze"
	case KindMerge:
		return "Merge"
	case KindMergeAbort:
		return "MergeAbort"
	case KindClose:
		return "Close"
	case KindGC:
		return "GC"
	case KindLeaseGrant:
		return "LeaseGrant"
	case KindLeaseRevoke:
		return "LeaseRevoke"
	case KindLeaseAttach:
		return "LeaseAttach"
	case KindLeaseSwept:
		return "LeaseSwept"
	case KindLeasePut:
		return "LeasePut"
	case KindLeaseDelete:
		return "LeaseDelete"
	case KindLeaseBatch:
		return "LeaseBatch"
	case KindLeaseCAS:
		return "LeaseCAS"
	case KindTxnCommit:
		return "TxnCommit"
	case KindTxnWrite:
		return "TxnWrite"
	case KindTxnResolve:
		return "TxnResolve"
	case KindTxnRecord:
		return "TxnRecord"
	case KindTxnPrevent:
		return "TxnPrevent"
	case KindTSOWindow:
		return "TSOWindow"
	case KindProtect:
		return "Protect"
	case KindRelease:
		return "Release"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// IsWrite reports whether the kind writes user keys (and so is subject to
// deduplication by client ID).
func (k Kind) IsWrite() bool {
	switch k {
	case KindPut, KindDelete, KindDeleteRange, KindBatch, KindCAS, KindTxnCommit, KindLeasePut, KindLeaseDelete,
		KindTxnWrite, KindTxnResolve, KindLeaseBatch, KindLeaseCAS:
		return true
	}
	return false
}

// Header identifies a command: who proposed it (so the proposer can match
// the applied entry to its waiting caller) and which client request it is
// (for deduplication).
type Header struct {
	// ProposerNode and ProposalID identify the proposal: ProposalID is
	// unique among ProposerNode's proposals, across restarts.
	ProposerNode uint64
	ProposalID   uint64
	// ClientID and RequestSeq identify the client request; ClientID 0
	// disables deduplication.
	ClientID   uint64
	RequestSeq uint64
	// ProposerTime is the proposer's wall clock (Unix nanoseconds) when it
	// proposed. It only drives the deduplication window, never correctness.
	ProposerTime int64
	// Timestamp is the proposal timestamp T: a write applies at version
	// max(T, F.Next()) of the range's frontier F. Zero asks for F.Next().
	Timestamp hlc.Timestamp
}

// TxnRead is one read of a transaction: a point key (End nil and Span
// false) or the span [Key, End) a scan covered (an empty End: the key
// space's end).
type TxnRead struct {
	Key, End []byte
	Span     bool
}

// TxnCommit is the body of a KindTxnCommit besides its mutations.
type TxnCommit struct {
	// ReadTimestamp is the transaction's snapshot R: every read was
	// served at R. The commit fails if a key read has a version above R.
	ReadTimestamp hlc.Timestamp
	// Reads are the keys and spans the transaction read from this range.
	Reads []TxnRead
}

// TxnIDLen is the length of a transaction ID.
const TxnIDLen = 16

// TxnID names a transaction across ranges: random, chosen by its
// coordinator.
type TxnID [TxnIDLen]byte

func (id TxnID) String() string { return fmt.Sprintf("%x", id[:]) }

// TxnWrite is the body of a KindTxnWrite besides its reads (Txn) and
// mutations.
type TxnWrite struct {
	// ID is the transaction's.
	ID TxnID
	// Record is the key of the transaction's record (the user key its
	// record range is addressed by).
	Record []byte
	// Stage: the same command stages the record, on the range holding
	// Record (a TxnStage's StageBound, Heartbeat and StageKeys), and
	// writes nothing unless the record can be staged.
	Stage      bool
	StageBound hlc.Timestamp
	Heartbeat  int64
	StageKeys  [][]byte
	// Resolve are resolutions of other, committed transactions' intents
	// on this range (each Committed), folded into this command: applied
	// before the write's own checks, whether or not it then writes
	// (docs/transactions.md, "Resolution folded into writes"). Only a
	// write with mutations carries them.
	Resolve []TxnResolve
	// DeleteRecords are IDs of finished records this range holds, deleted
	// with the folds (as a TxnDelete naming them does: one not finished,
	// or not here, is left), whether or not the write then writes. Only
	// a write with mutations carries them.
	DeleteRecords []TxnID
}

// extended reports whether t needs wire kind 36: a carried COMMITTED or
// a record deletion.
func (t *TxnWrite) extended() bool {
	return t.carries() || len(t.DeleteRecords) > 0
}

// carries reports whether a folded resolution of t carries its
// transaction's COMMITTED (TxnResolve.Record).
func (t *TxnWrite) carries() bool {
	for i := range t.Resolve {
		if len(t.Resolve[i].Record) > 0 {
			return true
		}
	}
	return false
}

// TxnResolve is the body of a KindTxnResolve.
type TxnResolve struct {
	// ID is the finished transaction's.
	ID TxnID
	// Committed: each intent of ID on Keys becomes a version at
	// CommitTimestamp; otherwise each is dropped.
	Committed       bool
	CommitTimestamp hlc.Timestamp
	// Keys are the keys whose intents to resolve; a key without an
	// intent of ID is left alone (resolution is idempotent).
	Keys [][]byte
	// Record, in a resolution folded into a TxnWrite only: the key of
	// ID's record, which the write's range holds. The fold is then the
	// record's COMMITTED at CommitTimestamp with Keys resolved (a
	// TxnCommitRecord with keys), carried by the write instead of
	// proposed alone (docs/transactions.md, "The COMMITTED carried by
	// writes").
	Record []byte
}

// TxnRecordOp is what a KindTxnRecord does. DO NOT CHANGE the values:
// they are stored in Raft logs.
type TxnRecordOp uint8

const (
	// TxnStage creates the record STAGING at Timestamp (the commit
	// candidate C0) with the keys of its intents, or moves a STAGING
	// record's C0 up (a re-stage).
	TxnStage TxnRecordOp = 1
	// TxnCommitRecord marks a STAGING record COMMITTED at Timestamp (at
	// or above its C0); with Keys, it also resolves the transaction's
	// intents on those keys (of the record's range) at the record's C,
	// once the record is COMMITTED.
	TxnCommitRecord TxnRecordOp = 2
	// TxnAbort marks the record ABORTED (creating it so if it is missing,
	// so that it can never be staged), if it is STAGING at Timestamp (zero:
	// at any).
	TxnAbort TxnRecordOp = 3
	// TxnHeartbeat raises a STAGING record's heartbeat.
	TxnHeartbeat TxnRecordOp = 4
	// TxnDelete deletes a finished (COMMITTED or ABORTED) record, and
	// those of the transaction IDs in Keys that are finished and held by
	// the same range.
	TxnDelete TxnRecordOp = 5
)

// TxnRecordCmd is the body of a KindTxnRecord.
type TxnRecordCmd struct {
	ID TxnID
	Op TxnRecordOp
	// RecordKey addresses the record's range (every op).
	RecordKey []byte
	// Timestamp: C0 (stage), C (commit), the expected C0 (abort).
	Timestamp hlc.Timestamp
	// Heartbeat is the coordinator's wall clock, Unix nanoseconds (stage,
	// heartbeat).
	Heartbeat int64
	// Keys are the keys of the transaction's intents (stage), of its
	// intents on this range to resolve (commit), or the IDs of more
	// finished records to delete (delete).
	Keys [][]byte
}

// TxnPrevent is the body of a KindTxnPrevent.
type TxnPrevent struct {
	ID TxnID
	// Timestamp is the staging timestamp C0 the intents must be at or
	// below.
	Timestamp hlc.Timestamp
	Keys      [][]byte
}

// Mutation is one write of a Put, Delete, DeleteRange, Batch, TxnCommit
// or TxnWrite command.
type Mutation struct {
	Kind Kind // KindPut, KindDelete or KindDeleteRange; KindLeasePut in a KindLeaseBatch
	// Key is the key written, or the start of a DeleteRange.
	Key []byte
	// Value is the value of a Put, or the (exclusive) end of a DeleteRange.
	Value []byte
	// Lease and Deadline are a KindLeasePut mutation's lease and attach
	// window (Command.Lease's ID and Deadline for a KindLeasePut command).
	Lease    uint64
	Deadline hlc.Timestamp
}

// CAS is a compare-and-swap of one key.
type CAS struct {
	Key []byte
	// ExpectAbsent: succeed only if the key does not exist. Otherwise
	// succeed only if it exists with value Expected.
	ExpectAbsent bool
	Expected     []byte
	// Delete: on success delete the key instead of writing NewValue.
	Delete   bool
	NewValue []byte
	// ExpectVersion: succeed only if the key exists and its newest version
	// is ExpectedVersion (ExpectAbsent and Expected are then ignored).
	ExpectVersion   bool
	ExpectedVersion hlc.Timestamp
}

// Command is one decoded command. Byte slices decoded from an entry alias
// the entry's data, which is immutable.
type Command struct {
	Header
	Kind Kind
	// Mutations: exactly one for KindPut, KindDelete and KindDeleteRange;
	// any number (at least one) for KindBatch and KindTxnCommit.
	Mutations []Mutation
	// Txn is set for KindTxnCommit and KindTxnWrite.
	Txn TxnCommit
	// TxnWrite is set for KindTxnWrite.
	TxnWrite TxnWrite
	// TxnResolve is set for KindTxnResolve.
	TxnResolve TxnResolve
	// TxnRecord is set for KindTxnRecord.
	TxnRecord TxnRecordCmd
	// TxnPrevent is set for KindTxnPrevent.
	TxnPrevent TxnPrevent
	// CAS is set for KindCAS.
	CAS CAS
	// Node is set for KindPutNode: the node to register. NodeId 0 asks the
	// meta range to allocate the next node ID.
	Node *kvpb.NodeDescriptor
	// Descriptor is set for KindPutDescriptor (the meta copy to store if it
	// is newer) and KindChangeReplicas (the range's next descriptor).
	Descriptor *kvpb.RangeDescriptor
	// NodeID is set for KindRemoveNode: the node to take out of the
	// registry.
	NodeID uint64
	// ExpectedGeneration, for KindChangeReplicas, KindSplit, KindFreeze,
	// KindMerge and KindMergeAbort, is the generation of the descriptor
	// the change was computed from; the change is rejected at apply time
	// if the range has moved on.
	ExpectedGeneration uint64
	// Right is set for KindSplit (the new right-hand range; Descriptor is
	// then the narrowed left-hand one) and KindMerge (the frozen
	// right-hand range to take over).
	Right *kvpb.RangeDescriptor
	// LeftRangeID and LeftGeneration, for KindFreeze and KindUnfreeze,
	// name the merge the freeze is for: the left-hand range and the
	// generation its merge command is computed from.
	LeftRangeID    uint64
	LeftGeneration uint64
	// FreezeIndex is set for KindMerge: the index of the right-hand
	// range's freeze, which every replica of it must have applied before
	// the merge applies beside it.
	FreezeIndex uint64
	// RightRangeID is set for KindMergeAbort: the range whose merge into
	// this one is abandoned.
	RightRangeID uint64
	// Descriptors is set for KindPutDescriptors: meta copies to store
	// together, each only if newer than the one stored.
	Descriptors []*kvpb.RangeDescriptor
	// Close is set for KindClose: the timestamp the range closes (no
	// version at or below it will ever be written on the range).
	Close hlc.Timestamp
	// GC is set for KindGC.
	GC GC
	// TSOWindow is set for KindTSOWindow: the wall time (Unix nanoseconds)
	// the oracle's persisted window is raised to, if it is below.
	TSOWindow int64
	// Lease is set for the lease kinds. A KindLeasePut also has its key
	// and value as its one KindPut mutation.
	Lease Lease
	// Protect is set for KindProtect and KindRelease.
	Protect Protect
}

// Lease is the body of a lease command (docs/leases.md).
type Lease struct {
	// ID is the lease (KindLeaseGrant: 0 asks meta to allocate one).
	ID uint64
	// TTLMillis is a KindLeaseGrant's time to live.
	TTLMillis uint64
	// Expired marks a KindLeaseRevoke decided by expiry, not by a client.
	Expired bool
	// Term, if not 0, is the meta Raft term a KindLeaseRevoke was decided
	// in: it is refused if a leader of another term appended it.
	Term uint64
	// Key is a KindLeaseAttach's user key.
	Key []byte
	// Deadline is a KindLeasePut's attach window: the put is refused if
	// it would apply at a version above it.
	Deadline hlc.Timestamp
	// Keys are a KindLeaseDelete's user keys: each is deleted if its
	// newest version is still attached to ID.
	Keys [][]byte
}

// GC raises a range's GC threshold and collects one chunk of the versions
// below it (rangesm/gc.go, docs/versions.md "Retention window and garbage
// collection").
type GC struct {
	// Threshold is the GC threshold asked for: the range's rises to it
	// (never falls).
	Threshold hlc.Timestamp
	// Start and End bound the user keys collected, [Start, End), clipped
	// to the range's span at apply time; an empty End is the range's end.
	Start, End []byte
	// MaxDeletes and MaxKeys bound the chunk (mvcc.GCOptions); the result
	// says where to resume.
	MaxDeletes, MaxKeys uint64
}

// ErrMalformed is returned for a command that does not decode.
var ErrMalformed = errors.New("command: malformed")

// ErrUnknownVersion is returned for a command written by a newer version
// of Shale. The node cannot apply it and must be upgraded.
var ErrUnknownVersion = errors.New("command: unknown encoding version")

// Encode appends the encoding of c to dst.
func (c *Command) Encode(dst []byte) ([]byte, error) {
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, c.ProposerNode)
	dst = binary.AppendUvarint(dst, c.ProposalID)
	dst = binary.AppendUvarint(dst, c.ClientID)
	dst = binary.AppendUvarint(dst, c.RequestSeq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.ProposerTime))
	if !c.Timestamp.Valid() {
		return nil, fmt.Errorf("command: invalid timestamp %s", c.Timestamp)
	}
	dst = c.Timestamp.AppendEncode(dst)
	if c.Kind == KindTxnWrite && (len(c.TxnWrite.Resolve) > 0 || len(c.TxnWrite.DeleteRecords) > 0) {
		if c.TxnWrite.extended() {
			dst = append(dst, byte(wireTxnWriteCarried))
		} else {
			dst = append(dst, byte(wireTxnWriteFolded))
		}
	} else if c.Kind == KindTxnWrite && c.TxnWrite.Stage {
		dst = append(dst, byte(wireTxnWriteStaged))
	} else {
		dst = append(dst, byte(c.Kind))
	}
	switch c.Kind {
	case KindPut, KindDelete, KindDeleteRange:
		if len(c.Mutations) != 1 || c.Mutations[0].Kind != c.Kind {
			return nil, fmt.Errorf("command: %v needs exactly one %v mutation, have %d", c.Kind, c.Kind, len(c.Mutations))
		}
		dst = appendMutationBody(dst, &c.Mutations[0])
	case KindBatch:
		var err error
		if dst, err = appendMutations(dst, c.Mutations, false); err != nil {
			return nil, err
		}
	case KindLeaseBatch:
		var err error
		if dst, err = appendMutations(dst, c.Mutations, true); err != nil {
			return nil, err
		}
	case KindTxnCommit, KindTxnWrite:
		if c.Kind == KindTxnWrite {
			for _, m := range c.Mutations {
				if m.Kind != KindPut && m.Kind != KindDelete {
					return nil, fmt.Errorf("command: a TxnWrite writes puts and deletes only, not %v", m.Kind)
				}
			}
			dst = append(dst, c.TxnWrite.ID[:]...)
			dst = appendBytes(dst, c.TxnWrite.Record)
		}
		if !c.Txn.ReadTimestamp.Valid() || (c.Txn.ReadTimestamp.IsZero() && len(c.Txn.Reads) > 0) {
			return nil, fmt.Errorf("command: invalid transaction read timestamp %s", c.Txn.ReadTimestamp)
		}
		dst = c.Txn.ReadTimestamp.AppendEncode(dst)
		dst = binary.AppendUvarint(dst, uint64(len(c.Txn.Reads)))
		for _, rd := range c.Txn.Reads {
			if rd.Span {
				dst = append(dst, txnReadSpan)
				dst = appendBytes(dst, rd.Key)
				dst = appendBytes(dst, rd.End)
			} else {
				dst = append(dst, 0)
				dst = appendBytes(dst, rd.Key)
			}
		}
		if c.Kind == KindTxnWrite && len(c.Mutations) == 0 {
			// A range the transaction only read.
			if len(c.Txn.Reads) == 0 {
				return nil, errors.New("command: a TxnWrite without writes or reads")
			}
			if len(c.TxnWrite.Resolve) > 0 || len(c.TxnWrite.DeleteRecords) > 0 {
				return nil, errors.New("command: folded resolutions and deletions ride on a TxnWrite with mutations only")
			}
			dst = binary.AppendUvarint(dst, 0)
			break
		}
		var err error
		if dst, err = appendMutations(dst, c.Mutations, false); err != nil {
			return nil, err
		}
		folded := c.Kind == KindTxnWrite && (len(c.TxnWrite.Resolve) > 0 || len(c.TxnWrite.DeleteRecords) > 0)
		if folded {
			// Wire kind 35: whether a stage follows, then the stage,
			// then the resolutions.
			if c.TxnWrite.Stage {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		}
		if t := &c.TxnWrite; c.Kind == KindTxnWrite && t.Stage {
			// The folded stage, after the mutations (wire kind 34).
			if !t.StageBound.Valid() || t.StageBound.IsZero() || len(t.StageKeys) == 0 {
				return nil, fmt.Errorf("command: a staging TxnWrite needs a bound and the keys of the intents")
			}
			dst = t.StageBound.AppendEncode(dst)
			dst = binary.LittleEndian.AppendUint64(dst, uint64(t.Heartbeat))
			dst = binary.AppendUvarint(dst, uint64(len(t.StageKeys)))
			for _, k := range t.StageKeys {
				dst = appendBytes(dst, k)
			}
		}
		if folded {
			carried := c.TxnWrite.extended()
			dst = binary.AppendUvarint(dst, uint64(len(c.TxnWrite.Resolve)))
			for i := range c.TxnWrite.Resolve {
				t := &c.TxnWrite.Resolve[i]
				if !t.Committed || !t.CommitTimestamp.Valid() || t.CommitTimestamp.IsZero() || len(t.Keys) == 0 {
					return nil, fmt.Errorf("command: a folded resolution is of a committed transaction, at its commit timestamp, on keys (%s at %s, %d keys)",
						t.ID, t.CommitTimestamp, len(t.Keys))
				}
				dst = append(dst, t.ID[:]...)
				dst = t.CommitTimestamp.AppendEncode(dst)
				dst = binary.AppendUvarint(dst, uint64(len(t.Keys)))
				for _, k := range t.Keys {
					dst = appendBytes(dst, k)
				}
				if carried {
					dst = appendBytes(dst, t.Record)
				}
			}
			if carried {
				dst = binary.AppendUvarint(dst, uint64(len(c.TxnWrite.DeleteRecords)))
				for _, id := range c.TxnWrite.DeleteRecords {
					dst = append(dst, id[:]...)
				}
			}
		}
	case KindTxnResolve:
		t := &c.TxnResolve
		dst = append(dst, t.ID[:]...)
		if t.Committed {
			if !t.CommitTimestamp.Valid() || t.CommitTimestamp.IsZero() {
				return nil, fmt.Errorf("command: invalid commit timestamp %s", t.CommitTimestamp)
			}
			dst = append(dst, txnResolveCommitted)
			dst = t.CommitTimestamp.AppendEncode(dst)
		} else {
			dst = append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(len(t.Keys)))
		for _, k := range t.Keys {
			dst = appendBytes(dst, k)
		}
	case KindTxnRecord:
		t := &c.TxnRecord
		if t.Op < TxnStage || t.Op > TxnDelete {
			return nil, fmt.Errorf("command: unknown transaction record op %d", t.Op)
		}
		if !t.Timestamp.Valid() {
			return nil, fmt.Errorf("command: invalid record timestamp %s", t.Timestamp)
		}
		dst = append(dst, t.ID[:]...)
		dst = append(dst, byte(t.Op))
		dst = appendBytes(dst, t.RecordKey)
		dst = t.Timestamp.AppendEncode(dst)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(t.Heartbeat))
		dst = binary.AppendUvarint(dst, uint64(len(t.Keys)))
		for _, k := range t.Keys {
			dst = appendBytes(dst, k)
		}
	case KindTxnPrevent:
		t := &c.TxnPrevent
		if !t.Timestamp.Valid() || t.Timestamp.IsZero() {
			return nil, fmt.Errorf("command: invalid prevent timestamp %s", t.Timestamp)
		}
		dst = append(dst, t.ID[:]...)
		dst = t.Timestamp.AppendEncode(dst)
		dst = binary.AppendUvarint(dst, uint64(len(t.Keys)))
		for _, k := range t.Keys {
			dst = appendBytes(dst, k)
		}
	case KindCAS, KindLeaseCAS:
		if c.Kind == KindLeaseCAS {
			if c.Lease.ID == 0 || !c.Lease.Deadline.Valid() || c.Lease.Deadline.IsZero() || c.CAS.Delete {
				return nil, fmt.Errorf("command: LeaseCAS with lease %d, deadline %s, delete %v", c.Lease.ID, c.Lease.Deadline, c.CAS.Delete)
			}
			dst = binary.AppendUvarint(dst, c.Lease.ID)
			dst = c.Lease.Deadline.AppendEncode(dst)
		}
		var flags byte
		if c.CAS.ExpectAbsent {
			flags |= casExpectAbsent
		}
		if c.CAS.Delete {
			flags |= casDelete
		}
		if c.CAS.ExpectVersion {
			flags |= casExpectVersion
			if !c.CAS.ExpectedVersion.Valid() {
				return nil, fmt.Errorf("command: invalid expected version %s", c.CAS.ExpectedVersion)
			}
		}
		dst = append(dst, flags)
		dst = appendBytes(dst, c.CAS.Key)
		dst = appendBytes(dst, c.CAS.Expected)
		dst = appendBytes(dst, c.CAS.NewValue)
		if c.CAS.ExpectVersion {
			dst = c.CAS.ExpectedVersion.AppendEncode(dst)
		}
	case KindDedupGC:
	case KindPutNode:
		b, err := proto.Marshal(c.Node)
		if err != nil {
			return nil, fmt.Errorf("command: encoding node: %w", err)
		}
		dst = appendBytes(dst, b)
	case KindRemoveNode:
		if c.NodeID == 0 {
			return nil, errors.New("command: RemoveNode without a node ID")
		}
		dst = binary.AppendUvarint(dst, c.NodeID)
	case KindPutDescriptor, KindChangeReplicas:
		if c.Kind == KindChangeReplicas {
			dst = binary.AppendUvarint(dst, c.ExpectedGeneration)
		}
		b, err := proto.Marshal(c.Descriptor)
		if err != nil {
			return nil, fmt.Errorf("command: encoding descriptor: %w", err)
		}
		dst = appendBytes(dst, b)
	case KindSplit:
		dst = binary.AppendUvarint(dst, c.ExpectedGeneration)
		for _, d := range []*kvpb.RangeDescriptor{c.Descriptor, c.Right} {
			if d == nil {
				return nil, errors.New("command: Split needs both descriptors")
			}
			b, err := proto.Marshal(d)
			if err != nil {
				return nil, fmt.Errorf("command: encoding descriptor: %w", err)
			}
			dst = appendBytes(dst, b)
		}
	case KindAllocRangeID:
	case KindPutDescriptors:
		if len(c.Descriptors) == 0 {
			return nil, errors.New("command: PutDescriptors without descriptors")
		}
		dst = binary.AppendUvarint(dst, uint64(len(c.Descriptors)))
		for _, d := range c.Descriptors {
			b, err := proto.Marshal(d)
			if err != nil {
				return nil, fmt.Errorf("command: encoding descriptor: %w", err)
			}
			dst = appendBytes(dst, b)
		}
	case KindFreeze:
		dst = binary.AppendUvarint(dst, c.ExpectedGeneration)
		dst = binary.AppendUvarint(dst, c.LeftRangeID)
		dst = binary.AppendUvarint(dst, c.LeftGeneration)
	case KindUnfreeze:
		dst = binary.AppendUvarint(dst, c.LeftRangeID)
		dst = binary.AppendUvarint(dst, c.LeftGeneration)
	case KindMerge:
		if c.Right == nil {
			return nil, errors.New("command: Merge needs the right-hand descriptor")
		}
		dst = binary.AppendUvarint(dst, c.ExpectedGeneration)
		dst = binary.AppendUvarint(dst, c.FreezeIndex)
		b, err := proto.Marshal(c.Right)
		if err != nil {
			return nil, fmt.Errorf("command: encoding descriptor: %w", err)
		}
		dst = appendBytes(dst, b)
	case KindMergeAbort:
		dst = binary.AppendUvarint(dst, c.ExpectedGeneration)
		dst = binary.AppendUvarint(dst, c.RightRangeID)
	case KindClose:
		if !c.Close.Valid() {
			return nil, fmt.Errorf("command: invalid close timestamp %s", c.Close)
		}
		dst = c.Close.AppendEncode(dst)
	case KindGC:
		if !c.GC.Threshold.Valid() {
			return nil, fmt.Errorf("command: GC threshold %s is invalid", c.GC.Threshold)
		}
		dst = c.GC.Threshold.AppendEncode(dst)
		dst = appendBytes(dst, c.GC.Start)
		dst = appendBytes(dst, c.GC.End)
		dst = binary.AppendUvarint(dst, c.GC.MaxDeletes)
		dst = binary.AppendUvarint(dst, c.GC.MaxKeys)
	case KindLeaseGrant:
		if c.Lease.TTLMillis == 0 {
			return nil, errors.New("command: LeaseGrant with a TTL of 0")
		}
		dst = binary.AppendUvarint(dst, c.Lease.ID)
		dst = binary.AppendUvarint(dst, c.Lease.TTLMillis)
	case KindLeaseRevoke:
		dst = binary.AppendUvarint(dst, c.Lease.ID)
		var flags byte
		if c.Lease.Expired {
			flags |= leaseExpired
		}
		if c.Lease.Term != 0 {
			flags |= leaseTerm
		}
		dst = append(dst, flags)
		if c.Lease.Term != 0 {
			dst = binary.AppendUvarint(dst, c.Lease.Term)
		}
	case KindLeaseAttach:
		dst = binary.AppendUvarint(dst, c.Lease.ID)
		dst = appendBytes(dst, c.Lease.Key)
	case KindLeaseSwept:
		dst = binary.AppendUvarint(dst, c.Lease.ID)
	case KindLeasePut:
		if len(c.Mutations) != 1 || c.Mutations[0].Kind != KindPut {
			return nil, fmt.Errorf("command: LeasePut needs exactly one Put mutation, have %d", len(c.Mutations))
		}
		if c.Lease.ID == 0 || !c.Lease.Deadline.Valid() || c.Lease.Deadline.IsZero() {
			return nil, fmt.Errorf("command: LeasePut with lease %d and deadline %s", c.Lease.ID, c.Lease.Deadline)
		}
		dst = binary.AppendUvarint(dst, c.Lease.ID)
		dst = c.Lease.Deadline.AppendEncode(dst)
		dst = appendMutationBody(dst, &c.Mutations[0])
	case KindLeaseDelete:
		if c.Lease.ID == 0 || len(c.Lease.Keys) == 0 {
			return nil, fmt.Errorf("command: LeaseDelete with lease %d and %d keys", c.Lease.ID, len(c.Lease.Keys))
		}
		dst = binary.AppendUvarint(dst, c.Lease.ID)
		dst = binary.AppendUvarint(dst, uint64(len(c.Lease.Keys)))
		for _, k := range c.Lease.Keys {
			dst = appendBytes(dst, k)
		}
	case KindTSOWindow:
		if c.TSOWindow <= 0 {
			return nil, fmt.Errorf("command: TSOWindow of %d", c.TSOWindow)
		}
		dst = binary.LittleEndian.AppendUint64(dst, uint64(c.TSOWindow))
	case KindProtect, KindRelease:
		return appendProtect(dst, c)
	default:
		return nil, fmt.Errorf("command: cannot encode kind %v", c.Kind)
	}
	return dst, nil
}

// lease_revoke flags.
const (
	leaseExpired byte = 1 << 0
	leaseTerm    byte = 1 << 1
)

// txnReadSpan flags a transaction read that is a span, not a point key.
const txnReadSpan byte = 1 << 0

// txnResolveCommitted flags a resolution of a committed transaction.
const txnResolveCommitted byte = 1 << 0

// appendMutations appends the mutations of a batch or transaction (at
// least one, each a put, delete or delete_range) or, with leases, of a
// lease_batch (the same, with at least one leased put among them).
func appendMutations(dst []byte, muts []Mutation, leases bool) ([]byte, error) {
	what := "batch"
	if leases {
		what = "lease batch"
	}
	if len(muts) == 0 {
		return nil, fmt.Errorf("command: empty %s", what)
	}
	leased := 0
	dst = binary.AppendUvarint(dst, uint64(len(muts)))
	for i := range muts {
		m := &muts[i]
		switch {
		case m.Kind == KindPut || m.Kind == KindDelete || m.Kind == KindDeleteRange:
		case m.Kind == KindLeasePut && leases:
			if m.Lease == 0 || !m.Deadline.Valid() || m.Deadline.IsZero() {
				return nil, fmt.Errorf("command: leased put %d with lease %d and deadline %s", i, m.Lease, m.Deadline)
			}
			leased++
		default:
			return nil, fmt.Errorf("command: %s mutation %d has kind %v", what, i, m.Kind)
		}
		dst = append(dst, byte(m.Kind))
		if m.Kind == KindLeasePut {
			dst = binary.AppendUvarint(dst, m.Lease)
			dst = m.Deadline.AppendEncode(dst)
		}
		dst = appendMutationBody(dst, m)
	}
	if leases && leased == 0 {
		return nil, errors.New("command: a lease batch without a leased put")
	}
	return dst, nil
}

const (
	casExpectAbsent  byte = 1 << 0
	casDelete        byte = 1 << 1
	casExpectVersion byte = 1 << 2 // version 2 only
)

func appendMutationBody(dst []byte, m *Mutation) []byte {
	dst = appendBytes(dst, m.Key)
	if m.Kind != KindDelete {
		dst = appendBytes(dst, m.Value)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Decode decodes data into c. Byte slices in c alias data. It returns an
// error matching ErrUnknownVersion for a newer encoding and ErrMalformed
// for anything else it cannot decode.
func Decode(data []byte, c *Command) error {
	*c = Command{}
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", ErrMalformed)
	}
	v := data[0]
	if v != Version && v != version1 {
		return fmt.Errorf("%w %d (this build reads versions %d and %d)", ErrUnknownVersion, v, version1, Version)
	}
	d := decoder{buf: data[1:]}
	c.ProposerNode = d.uvarint()
	c.ProposalID = d.uvarint()
	c.ClientID = d.uvarint()
	c.RequestSeq = d.uvarint()
	c.ProposerTime = int64(d.fixed64())
	if v == version1 {
		c.Timestamp = hlc.Timestamp{WallTime: max(c.ProposerTime, 0)}
	} else {
		c.Timestamp = d.timestamp()
	}
	c.Kind = Kind(d.byte())
	folded, carried := false, false
	switch c.Kind {
	case wireTxnWriteStaged:
		c.Kind, c.TxnWrite.Stage = KindTxnWrite, true
	case wireTxnWriteFolded:
		c.Kind, folded = KindTxnWrite, true
	case wireTxnWriteCarried:
		c.Kind, folded, carried = KindTxnWrite, true, true
	}
	switch c.Kind {
	case KindPut, KindDelete, KindDeleteRange:
		c.Mutations = []Mutation{d.mutationBody(c.Kind)}
	case KindBatch:
		c.Mutations = d.mutations(false)
	case KindLeaseBatch:
		c.Mutations = d.mutations(true)
	case KindTxnCommit, KindTxnWrite:
		if v == version1 {
			d.fail("%v in a version 1 command", c.Kind)
			break
		}
		if c.Kind == KindTxnWrite {
			c.TxnWrite.ID = d.txnID()
			c.TxnWrite.Record = d.bytes()
		}
		c.Txn.ReadTimestamp = d.timestamp()
		n := d.uvarint()
		// Every read takes at least two bytes.
		if n > uint64(len(d.buf))/2 {
			d.fail("read count %d for %d bytes", n, len(d.buf))
			break
		}
		if n > 0 {
			c.Txn.Reads = make([]TxnRead, n)
		}
		for i := range c.Txn.Reads {
			flags := d.byte()
			if flags&^txnReadSpan != 0 {
				d.fail("unknown transaction read flags %#x", flags)
			}
			if d.err != nil {
				break
			}
			rd := TxnRead{Key: d.bytes(), Span: flags&txnReadSpan != 0}
			if rd.Span {
				rd.End = d.bytes()
			}
			c.Txn.Reads[i] = rd
		}
		if d.err == nil && c.Kind == KindTxnWrite && !folded && len(d.buf) == 1 && d.buf[0] == 0 && len(c.Txn.Reads) > 0 {
			d.buf = d.buf[1:] // no mutations: a range the transaction only read
		} else if d.err == nil {
			c.Mutations = d.mutations(false)
			if folded && d.err == nil {
				switch d.byte() {
				case 0:
				case 1:
					c.TxnWrite.Stage = true
				default:
					d.fail("unknown folded TxnWrite stage flag")
				}
			}
			if t := &c.TxnWrite; d.err == nil && c.Kind == KindTxnWrite && t.Stage {
				t.StageBound = d.timestamp()
				t.Heartbeat = int64(d.fixed64())
				t.StageKeys = d.keyList()
			}
			if folded && d.err == nil {
				n := d.uvarint()
				// Every resolution takes at least 30 bytes (kind 36: may
				// be none, with deletions).
				if (n == 0 && !carried) || n > uint64(len(d.buf))/30 {
					d.fail("folded resolution count %d for %d bytes", n, len(d.buf))
					break
				}
				c.TxnWrite.Resolve = make([]TxnResolve, n)
				for i := range c.TxnWrite.Resolve {
					t := &c.TxnWrite.Resolve[i]
					t.ID, t.Committed = d.txnID(), true
					t.CommitTimestamp = d.timestamp()
					t.Keys = d.keyList()
					if carried {
						if t.Record = d.bytes(); len(t.Record) == 0 {
							t.Record = nil
						}
					}
					if d.err != nil {
						break
					}
				}
				if n == 0 {
					c.TxnWrite.Resolve = nil
				}
				if carried && d.err == nil {
					m := d.uvarint()
					if (m == 0 && n == 0) || m > uint64(len(d.buf))/TxnIDLen {
						d.fail("record deletion count %d for %d bytes", m, len(d.buf))
						break
					}
					if m > 0 {
						c.TxnWrite.DeleteRecords = make([]TxnID, m)
						for i := range c.TxnWrite.DeleteRecords {
							c.TxnWrite.DeleteRecords[i] = d.txnID()
						}
					}
				}
			}
		}
		if c.Kind == KindTxnWrite {
			for _, m := range c.Mutations {
				if m.Kind != KindPut && m.Kind != KindDelete {
					d.fail("a TxnWrite writes puts and deletes only, not %v", m.Kind)
				}
			}
		}
	case KindTxnResolve:
		if v == version1 {
			d.fail("txn_resolve in a version 1 command")
			break
		}
		t := &c.TxnResolve
		t.ID = d.txnID()
		flags := d.byte()
		if flags&^txnResolveCommitted != 0 {
			d.fail("unknown resolve flags %#x", flags)
			break
		}
		if flags&txnResolveCommitted != 0 {
			t.Committed = true
			t.CommitTimestamp = d.timestamp()
		}
		t.Keys = d.keyList()
	case KindTxnRecord:
		if v == version1 {
			d.fail("txn_record in a version 1 command")
			break
		}
		t := &c.TxnRecord
		t.ID = d.txnID()
		t.Op = TxnRecordOp(d.byte())
		if d.err == nil && (t.Op < TxnStage || t.Op > TxnDelete) {
			d.fail("unknown transaction record op %d", t.Op)
		}
		t.RecordKey = d.bytes()
		t.Timestamp = d.timestamp()
		t.Heartbeat = int64(d.fixed64())
		t.Keys = d.keyList()
	case KindTxnPrevent:
		if v == version1 {
			d.fail("txn_prevent in a version 1 command")
			break
		}
		t := &c.TxnPrevent
		t.ID = d.txnID()
		t.Timestamp = d.timestamp()
		t.Keys = d.keyList()
	case KindCAS, KindLeaseCAS:
		if c.Kind == KindLeaseCAS {
			c.Lease.ID = d.uvarint()
			c.Lease.Deadline = d.timestamp()
			if d.err == nil && c.Lease.ID == 0 {
				d.fail("LeaseCAS with lease 0")
			}
		}
		flags := d.byte()
		known := casExpectAbsent | casDelete
		if v != version1 {
			known |= casExpectVersion
		}
		if flags&^known != 0 {
			d.fail("unknown CAS flags %#x", flags)
		}
		c.CAS.ExpectAbsent = flags&casExpectAbsent != 0
		c.CAS.Delete = flags&casDelete != 0
		if c.Kind == KindLeaseCAS && c.CAS.Delete {
			d.fail("LeaseCAS with the delete flag")
		}
		c.CAS.Key = d.bytes()
		c.CAS.Expected = d.bytes()
		c.CAS.NewValue = d.bytes()
		if flags&casExpectVersion != 0 {
			c.CAS.ExpectVersion = true
			c.CAS.ExpectedVersion = d.timestamp()
		}
	case KindDedupGC:
	case KindPutNode:
		b := d.bytes()
		if d.err == nil {
			c.Node = &kvpb.NodeDescriptor{}
			if err := proto.Unmarshal(b, c.Node); err != nil {
				d.fail("node: %v", err)
			}
		}
	case KindRemoveNode:
		c.NodeID = d.uvarint()
	case KindPutDescriptor, KindChangeReplicas:
		if c.Kind == KindChangeReplicas {
			c.ExpectedGeneration = d.uvarint()
		}
		b := d.bytes()
		if d.err == nil {
			c.Descriptor = &kvpb.RangeDescriptor{}
			if err := proto.Unmarshal(b, c.Descriptor); err != nil {
				d.fail("descriptor: %v", err)
			}
		}
	case KindSplit:
		c.ExpectedGeneration = d.uvarint()
		c.Descriptor = d.descriptor()
		c.Right = d.descriptor()
	case KindAllocRangeID:
	case KindPutDescriptors:
		n := d.uvarint()
		if n == 0 || n > uint64(len(d.buf)) {
			d.fail("descriptor count %d for %d bytes", n, len(d.buf))
			break
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			c.Descriptors = append(c.Descriptors, d.descriptor())
		}
	case KindFreeze:
		c.ExpectedGeneration = d.uvarint()
		c.LeftRangeID = d.uvarint()
		c.LeftGeneration = d.uvarint()
	case KindUnfreeze:
		c.LeftRangeID = d.uvarint()
		c.LeftGeneration = d.uvarint()
	case KindMerge:
		c.ExpectedGeneration = d.uvarint()
		c.FreezeIndex = d.uvarint()
		c.Right = d.descriptor()
	case KindMergeAbort:
		c.ExpectedGeneration = d.uvarint()
		c.RightRangeID = d.uvarint()
	case KindClose:
		if v == version1 {
			d.fail("close in a version 1 command")
			break
		}
		c.Close = d.timestamp()
	case KindGC:
		if v == version1 {
			d.fail("gc in a version 1 command")
			break
		}
		c.GC.Threshold = d.timestamp()
		c.GC.Start = d.bytes()
		c.GC.End = d.bytes()
		c.GC.MaxDeletes = d.uvarint()
		c.GC.MaxKeys = d.uvarint()
	case KindLeaseGrant, KindLeaseRevoke, KindLeaseAttach, KindLeaseSwept, KindLeasePut, KindLeaseDelete:
		if v == version1 {
			d.fail("%v in a version 1 command", c.Kind)
			break
		}
		d.lease(c)
	case KindTSOWindow:
		c.TSOWindow = int64(d.fixed64())
		if d.err == nil && c.TSOWindow <= 0 {
			d.fail("TSOWindow of %d", c.TSOWindow)
		}
	case KindProtect, KindRelease:
		if v == version1 {
			d.fail("%v in a version 1 command", c.Kind)
			break
		}
		d.protect(c)
	default:
		d.fail("unknown kind %d", uint8(c.Kind))
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return d.err
	}
	return nil
}

// decoder reads the primitives of the grammar; the first failure sticks
// and later reads return zero values.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) < 1 {
		d.fail("truncated")
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.buf) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.buf)
	d.buf = d.buf[8:]
	return v
}

func (d *decoder) timestamp() hlc.Timestamp {
	if d.err != nil {
		return hlc.Timestamp{}
	}
	if len(d.buf) < hlc.EncodedLen {
		d.fail("truncated")
		return hlc.Timestamp{}
	}
	ts, err := hlc.Decode(d.buf[:hlc.EncodedLen])
	if err != nil {
		d.fail("timestamp: %v", err)
		return hlc.Timestamp{}
	}
	d.buf = d.buf[hlc.EncodedLen:]
	return ts
}

// keyList reads count:uvarint key:bytes{count}.
func (d *decoder) keyList() [][]byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	// Every key takes at least one byte.
	if n > uint64(len(d.buf)) {
		d.fail("key count %d for %d bytes", n, len(d.buf))
		return nil
	}
	var ks [][]byte
	if n > 0 {
		ks = make([][]byte, n)
	}
	for i := range ks {
		ks[i] = d.bytes()
	}
	return ks
}

func (d *decoder) txnID() (id TxnID) {
	if d.err != nil {
		return id
	}
	if len(d.buf) < TxnIDLen {
		d.fail("truncated")
		return id
	}
	copy(id[:], d.buf)
	d.buf = d.buf[TxnIDLen:]
	return id
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) || n > math.MaxInt32 {
		d.fail("length %d past the end (%d bytes left)", n, len(d.buf))
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

// descriptor reads a length-prefixed protobuf RangeDescriptor.
func (d *decoder) descriptor() *kvpb.RangeDescriptor {
	b := d.bytes()
	if d.err != nil {
		return nil
	}
	desc := &kvpb.RangeDescriptor{}
	if err := proto.Unmarshal(b, desc); err != nil {
		d.fail("descriptor: %v", err)
		return nil
	}
	return desc
}

// mutations reads a batch's or transaction's mutations (at least one)
// or, with leases, a lease_batch's (at least one leased put among them).
func (d *decoder) mutations(leases bool) []Mutation {
	what := "batch"
	if leases {
		what = "lease batch"
	}
	n := d.uvarint()
	// Every mutation takes at least two bytes; refuse counts the data
	// cannot hold before allocating for them.
	if n == 0 || n > uint64(len(d.buf))/2 {
		d.fail("%s count %d for %d bytes", what, n, len(d.buf))
		return nil
	}
	muts := make([]Mutation, n)
	leased := 0
	for i := range muts {
		k := Kind(d.byte())
		var id uint64
		var deadline hlc.Timestamp
		switch {
		case k == KindPut || k == KindDelete || k == KindDeleteRange:
		case k == KindLeasePut && leases:
			id, deadline = d.uvarint(), d.timestamp()
			if d.err == nil && id == 0 {
				d.fail("leased put %d with lease 0", i)
			}
			leased++
		default:
			d.fail("%s mutation %d has kind %v", what, i, k)
		}
		if d.err != nil {
			break
		}
		body := k
		if k == KindLeasePut {
			body = KindPut
		}
		muts[i] = d.mutationBody(body)
		muts[i].Kind, muts[i].Lease, muts[i].Deadline = k, id, deadline
	}
	if d.err == nil && leases && leased == 0 {
		d.fail("a lease batch without a leased put")
	}
	return muts
}

func (d *decoder) mutationBody(k Kind) Mutation {
	m := Mutation{Kind: k, Key: d.bytes()}
	if k != KindDelete {
		m.Value = d.bytes()
	}
	return m
}

// lease decodes the body of a lease command into c.
func (d *decoder) lease(c *Command) {
	c.Lease.ID = d.uvarint()
	switch c.Kind {
	case KindLeaseGrant:
		c.Lease.TTLMillis = d.uvarint()
		if d.err == nil && c.Lease.TTLMillis == 0 {
			d.fail("LeaseGrant with a TTL of 0")
		}
	case KindLeaseRevoke:
		flags := d.byte()
		if flags&^(leaseExpired|leaseTerm) != 0 {
			d.fail("unknown LeaseRevoke flags %#x", flags)
		}
		c.Lease.Expired = flags&leaseExpired != 0
		if flags&leaseTerm != 0 {
			c.Lease.Term = d.uvarint()
			if d.err == nil && c.Lease.Term == 0 {
				d.fail("LeaseRevoke with term 0")
			}
		}
	case KindLeaseAttach:
		c.Lease.Key = d.bytes()
	case KindLeasePut:
		c.Lease.Deadline = d.timestamp()
		c.Mutations = []Mutation{d.mutationBody(KindPut)}
		if d.err == nil && c.Lease.ID == 0 {
			d.fail("LeasePut with lease 0")
		}
	case KindLeaseDelete:
		n := d.uvarint()
		// Every key takes at least one byte.
		if n == 0 || n > uint64(len(d.buf)) {
			d.fail("LeaseDelete count %d for %d bytes", n, len(d.buf))
			return
		}
		c.Lease.Keys = make([][]byte, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			c.Lease.Keys = append(c.Lease.Keys, d.bytes())
		}
	}
}

// PeekKind returns the kind of an encoded command without decoding its
// body (false if data is not a command of a version this build reads).
func PeekKind(data []byte) (Kind, bool) {
	if len(data) == 0 || (data[0] != Version && data[0] != version1) {
		return 0, false
	}
	d := decoder{buf: data[1:]}
	for i := 0; i < 4; i++ {
		d.uvarint()
	}
	d.fixed64()
	if data[0] != version1 {
		d.timestamp()
	}
	k := Kind(d.byte())
	if k == wireTxnWriteStaged || k == wireTxnWriteFolded || k == wireTxnWriteCarried {
		k = KindTxnWrite
	}
	return k, d.err == nil
}
