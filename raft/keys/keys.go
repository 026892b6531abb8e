// Package keys defines the layout of every engine key Shale writes.
//
// One engine holds everything a node stores. The first byte of an engine
// key says what kind of key it is, so that each kind is one contiguous span
// and one range's keys can be copied, dropped or snapshotted with span
// operations (docs/formats.md, "Raft and range keys"). The store identity
// (StoreIdentKey, 0x00 0x00*8 "ident", store_ident.go) sorts before every
// per-range node-local key.
//
//	engine key  := 0x00 node-local     -- never replicated
//	             | 0x01 range-local    -- replicated, part of a range's snapshot
//	             | 0x02 meta           -- system keys, held by the meta range
//	             | 0x03 user key       -- the user key space
//
//	node-local  := 0x00 'r' range_id 'h'                      Raft HardState
//	             | 0x00 'r' range_id 'i'                      this node's replica ID
//	             | 0x00 'r' range_id 'l' index                Raft log entry
//	             | 0x00 'r' range_id 't'                      truncated state
//	             | 0x00 'r' range_id 'x'                      replica tombstone
//	             | 0x00 'n' node_id                           peer address book
//	range-local := 0x01 'r' range_id 'a'                      applied state
//	             | 0x01 'r' range_id 'c'                      Raft ConfState
//	             | 0x01 'r' range_id 'd'                      range descriptor
//	             | 0x01 'r' range_id 'f' client_id            dedup floor
//	             | 0x01 'r' range_id 'q' client_id seq        dedup record
//	             | 0x01 'r' range_id 'v'                      MVCC state (frontier, GC threshold)
//	             | 0x01 'r' range_id 's'                      MVCC stats of the range's user data
//	             | 0x01 'r' range_id 'k' user_key             intent on user_key (lock table)
//	             | 0x01 'r' range_id 'x' txn_id               transaction record
//	meta        := 0x02 'd' 0x00 end_key                      user range descriptor
//	             | 0x02 'd' 0x01                              ... whose end is +inf
//	             | 0x02 'm'                                   meta range descriptor
//	             | 0x02 'n' node_id                           node registry entry
//	             | 0x02 'c' name                              cluster-wide counter
//	             | 0x02 'k' lease_id user_key                 lease attachment (lease.go)
//	             | 0x02 'l' lease_id                          lease record (lease.go)
//	             | 0x02 'p' protection_id                     protected timestamp (protect.go)
//	user        := 0x03 versioned_key                         (package mvcc: key_enc version_suffix)
//
//	range_id, index, client_id, seq, node_id := fixed64, big-endian
//
// Integers in keys are big-endian so that byte order is numeric order: a
// range's log entries sort by index and a range's keys sort together.
//
// The prefixes and suffix bytes are part of the on-disk format. DO NOT
// CHANGE THEM: they are stored in every engine.
package keys

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/storage"
)

// Key kinds: the first byte of every engine key. DO NOT CHANGE.
const (
	NodeLocalPrefix  byte = 0x00
	RangeLocalPrefix byte = 0x01
	MetaPrefix       byte = 0x02
	UserPrefix       byte = 0x03
)

// Suffix bytes of per-range keys. DO NOT CHANGE.
const (
	rangeInfix = 'r'

	suffixHardState      = 'h'
	suffixReplicaID      = 'i'
	suffixLogEntry       = 'l'
	suffixTruncatedState = 't'
	suffixTombstone      = 'x'

	suffixAppliedState = 'a'
	suffixConfState    = 'c'
	suffixDescriptor   = 'd'
	suffixDedupFloor   = 'f'
	suffixDedupRecord  = 'q'
	suffixMerged       = 'm'
	suffixFreeze       = 'z'
	suffixMVCCState    = 'v'
	suffixMVCCStats    = 's'
	suffixLock         = 'k'
	suffixTxnRecord    = 'x'
)

// Meta key infixes. DO NOT CHANGE.
const (
	metaDescriptor      = 'd'
	metaRangeDescriptor = 'm'
	metaNode            = 'n'
	metaCounter         = 'c'

	metaEndFinite   = 0x00
	metaEndInfinite = 0x01
)

// rangeKey returns prefix 'r' range_id suffix, with room for extra bytes.
func rangeKey(prefix byte, rangeID uint64, suffix byte, extra int) []byte {
	k := make([]byte, 0, 11+extra)
	k = append(k, prefix, rangeInfix)
	k = binary.BigEndian.AppendUint64(k, rangeID)
	return append(k, suffix)
}

// HardStateKey holds range rangeID's Raft HardState.
func HardStateKey(rangeID uint64) []byte {
	return rangeKey(NodeLocalPrefix, rangeID, suffixHardState, 0)
}

// ReplicaIDKey holds the replica ID (Raft peer ID) of this node's replica
// of rangeID. An uninitialized replica has no descriptor to find it in.
func ReplicaIDKey(rangeID uint64) []byte {
	return rangeKey(NodeLocalPrefix, rangeID, suffixReplicaID, 0)
}

// TruncatedStateKey holds the index and term of the last entry removed from
// range rangeID's log.
func TruncatedStateKey(rangeID uint64) []byte {
	return rangeKey(NodeLocalPrefix, rangeID, suffixTruncatedState, 0)
}

// TombstoneKey marks a replica of rangeID that this node removed, so that a
// late message cannot bring it back.
func TombstoneKey(rangeID uint64) []byte {
	return rangeKey(NodeLocalPrefix, rangeID, suffixTombstone, 0)
}

// LogKey holds the log entry at index of range rangeID.
func LogKey(rangeID, index uint64) []byte {
	return AppendLogKey(nil, rangeID, index)
}

// AppendLogKey appends LogKey(rangeID, index) to dst; it lets hot paths
// reuse one buffer.
func AppendLogKey(dst []byte, rangeID, index uint64) []byte {
	dst = append(dst, NodeLocalPrefix, rangeInfix)
	dst = binary.BigEndian.AppendUint64(dst, rangeID)
	dst = append(dst, suffixLogEntry)
	return binary.BigEndian.AppendUint64(dst, index)
}

// LogKeyPrefixLen is the length of a log key without its index.
const LogKeyPrefixLen = 11

// LogIndex decodes the index of a key made by LogKey.
func LogIndex(key []byte) (uint64, error) {
	if len(key) != LogKeyPrefixLen+8 || key[0] != NodeLocalPrefix || key[1] != rangeInfix ||
		key[10] != suffixLogEntry {
		return 0, fmt.Errorf("keys: %x is not a Raft log key", key)
	}
	return binary.BigEndian.Uint64(key[LogKeyPrefixLen:]), nil
}

// LogSpan returns the span of range rangeID's log entries with index in
// [lo, hi).
func LogSpan(rangeID, lo, hi uint64) Span {
	return Span{Start: LogKey(rangeID, lo), End: LogKey(rangeID, hi)}
}

// LogSpanAll returns the span of every log entry of range rangeID.
func LogSpanAll(rangeID uint64) Span {
	return Span{
		Start: rangeKey(NodeLocalPrefix, rangeID, suffixLogEntry, 0),
		End:   rangeKey(NodeLocalPrefix, rangeID, suffixLogEntry+1, 0),
	}
}

// NodeLocalRangeSpan returns the span of every node-local key of range
// rangeID (HardState, log, truncated state, tombstone).
func NodeLocalRangeSpan(rangeID uint64) Span {
	return rangeSpan(NodeLocalPrefix, rangeID)
}

// AppliedStateKey holds the applied index and term of range rangeID.
func AppliedStateKey(rangeID uint64) []byte {
	return rangeKey(RangeLocalPrefix, rangeID, suffixAppliedState, 0)
}

// ConfStateKey holds the Raft ConfState of range rangeID as of its applied
// index.
func ConfStateKey(rangeID uint64) []byte {
	return rangeKey(RangeLocalPrefix, rangeID, suffixConfState, 0)
}

// DescriptorKey holds the authoritative descriptor of range rangeID.
func DescriptorKey(rangeID uint64) []byte {
	return rangeKey(RangeLocalPrefix, rangeID, suffixDescriptor, 0)
}

// DedupRecordKey holds the outcome of request (clientID, seq) in range
// rangeID.
func DedupRecordKey(rangeID, clientID, seq uint64) []byte {
	k := rangeKey(RangeLocalPrefix, rangeID, suffixDedupRecord, 16)
	k = binary.BigEndian.AppendUint64(k, clientID)
	return binary.BigEndian.AppendUint64(k, seq)
}

// DedupRecordSpan returns the span of every dedup record of range rangeID.
func DedupRecordSpan(rangeID uint64) Span {
	return Span{
		Start: rangeKey(RangeLocalPrefix, rangeID, suffixDedupRecord, 0),
		End:   rangeKey(RangeLocalPrefix, rangeID, suffixDedupRecord+1, 0),
	}
}

// DedupClientSpan returns the span of client clientID's dedup records in
// range rangeID with seq in [lo, hi).
func DedupClientSpan(rangeID, clientID, lo, hi uint64) Span {
	return Span{Start: DedupRecordKey(rangeID, clientID, lo), End: DedupRecordKey(rangeID, clientID, hi)}
}

// DecodeDedupRecordKey returns the client and seq of a dedup record key.
func DecodeDedupRecordKey(key []byte) (clientID, seq uint64, err error) {
	if len(key) != 11+16 || key[0] != RangeLocalPrefix || key[1] != rangeInfix ||
		key[10] != suffixDedupRecord {
		return 0, 0, fmt.Errorf("keys: %x is not a dedup record key", key)
	}
	return binary.BigEndian.Uint64(key[11:]), binary.BigEndian.Uint64(key[19:]), nil
}

// DedupFloorKey holds the lowest request_seq of clientID that range rangeID
// can still deduplicate.
func DedupFloorKey(rangeID, clientID uint64) []byte {
	k := rangeKey(RangeLocalPrefix, rangeID, suffixDedupFloor, 8)
	return binary.BigEndian.AppendUint64(k, clientID)
}

// DedupFloorSpan returns the span of every dedup floor of range rangeID.
func DedupFloorSpan(rangeID uint64) Span {
	return Span{
		Start: rangeKey(RangeLocalPrefix, rangeID, suffixDedupFloor, 0),
		End:   rangeKey(RangeLocalPrefix, rangeID, suffixDedupFloor+1, 0),
	}
}

// DecodeDedupFloorKey returns the client ID of a dedup floor key.
func DecodeDedupFloorKey(key []byte) (uint64, error) {
	if len(key) != 11+8 || key[0] != RangeLocalPrefix || key[1] != rangeInfix ||
		key[10] != suffixDedupFloor {
		return 0, fmt.Errorf("keys: %x is not a dedup floor key", key)
	}
	return binary.BigEndian.Uint64(key[11:]), nil
}

// LockKey holds range rangeID's intent on user key k: its lock table
// entry (docs/transactions.md). The user key follows the fixed-length
// prefix as it is, so a range's entries sort in user key order.
func LockKey(rangeID uint64, k []byte) []byte {
	return append(rangeKey(RangeLocalPrefix, rangeID, suffixLock, len(k)), k...)
}

// LockSpan returns the span of range rangeID's lock table entries for the
// user keys [start, end) (an empty end: to the end of the key space).
func LockSpan(rangeID uint64, start, end []byte) Span {
	sp := Span{Start: LockKey(rangeID, start)}
	if len(end) == 0 {
		sp.End = rangeKey(RangeLocalPrefix, rangeID, suffixLock+1, 0)
	} else {
		sp.End = LockKey(rangeID, end)
	}
	return sp
}

// DecodeLockKey returns the user key of a lock table key (aliasing key).
func DecodeLockKey(key []byte) ([]byte, error) {
	if len(key) < 11 || key[0] != RangeLocalPrefix || key[1] != rangeInfix || key[10] != suffixLock {
		return nil, fmt.Errorf("keys: %x is not a lock table key", key)
	}
	return key[11:], nil
}

// TxnRecordKey holds the record of transaction txnID (16 bytes) in range
// rangeID: the range holding the transaction's record key.
func TxnRecordKey(rangeID uint64, txnID []byte) []byte {
	return append(rangeKey(RangeLocalPrefix, rangeID, suffixTxnRecord, len(txnID)), txnID...)
}

// TxnRecordSpan returns the span of every transaction record of range
// rangeID.
func TxnRecordSpan(rangeID uint64) Span {
	return Span{
		Start: rangeKey(RangeLocalPrefix, rangeID, suffixTxnRecord, 0),
		End:   rangeKey(RangeLocalPrefix, rangeID, suffixTxnRecord+1, 0),
	}
}

// DecodeTxnRecordKey returns the transaction ID of a record key (aliasing
// key).
func DecodeTxnRecordKey(key []byte) ([]byte, error) {
	if len(key) != 11+16 || key[0] != RangeLocalPrefix || key[1] != rangeInfix || key[10] != suffixTxnRecord {
		return nil, fmt.Errorf("keys: %x is not a transaction record key", key)
	}
	return key[11:], nil
}

// FreezeKey holds range rangeID's freeze record while it is frozen for a
// merge into its left-hand neighbour (raft/merge.go).
func FreezeKey(rangeID uint64) []byte {
	return rangeKey(RangeLocalPrefix, rangeID, suffixFreeze, 0)
}

// MergedKey marks, in range leftID's replicated state, that range rightID
// was merged into it, so that an abort of that merge can tell it happened.
func MergedKey(leftID, rightID uint64) []byte {
	return binary.BigEndian.AppendUint64(rangeKey(RangeLocalPrefix, leftID, suffixMerged, 8), rightID)
}

// RangeLocalSpan returns the span of every range-local key of rangeID: the
// replicated state that travels in snapshots besides the range's data.
func RangeLocalSpan(rangeID uint64) Span {
	return rangeSpan(RangeLocalPrefix, rangeID)
}

func rangeSpan(prefix byte, rangeID uint64) Span {
	start := make([]byte, 0, 10)
	start = append(start, prefix, rangeInfix)
	start = binary.BigEndian.AppendUint64(start, rangeID)
	var end []byte
	if rangeID == ^uint64(0) {
		end = []byte{prefix, rangeInfix + 1}
	} else {
		end = append([]byte{prefix, rangeInfix}, binary.BigEndian.AppendUint64(nil, rangeID+1)...)
	}
	return Span{Start: start, End: end}
}

// MetaDescriptorKey addresses the meta copy of the descriptor of the user
// range whose (exclusive) end key is endKey; an empty endKey is +inf. A
// lookup of user key k seeks to the first descriptor key > MetaDescriptorKey(k).
func MetaDescriptorKey(endKey []byte) []byte {
	if len(endKey) == 0 {
		return []byte{MetaPrefix, metaDescriptor, metaEndInfinite}
	}
	k := make([]byte, 0, 3+len(endKey))
	k = append(k, MetaPrefix, metaDescriptor, metaEndFinite)
	return append(k, endKey...)
}

// MetaLookupKey returns the key to seek (exclusively: the first descriptor
// key strictly greater) to find the user range holding userKey.
func MetaLookupKey(userKey []byte) []byte {
	k := make([]byte, 0, 3+len(userKey))
	k = append(k, MetaPrefix, metaDescriptor, metaEndFinite)
	return append(k, userKey...)
}

// MetaDescriptorSpan returns the span of every user range descriptor in meta.
func MetaDescriptorSpan() Span {
	return Span{Start: []byte{MetaPrefix, metaDescriptor}, End: []byte{MetaPrefix, metaDescriptor + 1}}
}

// MetaRangeDescriptorKey holds the meta copy of the meta range's descriptor.
func MetaRangeDescriptorKey() []byte { return []byte{MetaPrefix, metaRangeDescriptor} }

// NodeKey holds the registry entry (NodeDescriptor) of node nodeID.
func NodeKey(nodeID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{MetaPrefix, metaNode}, nodeID)
}

// NodeSpan returns the span of every node registry entry.
func NodeSpan() Span {
	return Span{Start: []byte{MetaPrefix, metaNode}, End: []byte{MetaPrefix, metaNode + 1}}
}

// DecodeNodeKey returns the node ID of a key made by NodeKey.
func DecodeNodeKey(key []byte) (uint64, error) {
	if len(key) != 10 || key[0] != MetaPrefix || key[1] != metaNode {
		return 0, fmt.Errorf("keys: %x is not a node registry key", key)
	}
	return binary.BigEndian.Uint64(key[2:]), nil
}

// CounterKey holds the cluster-wide counter name (e.g. "node-id").
func CounterKey(name string) []byte {
	return append([]byte{MetaPrefix, metaCounter}, name...)
}

// MetaSpan is the span of every meta key: the data of the meta range.
func MetaSpan() Span { return Span{Start: []byte{MetaPrefix}, End: []byte{MetaPrefix + 1}} }

// UserKeyspace is where user data lives (store format 2): every engine key
// under UserPrefix is a versioned key of package mvcc, the user key escaped
// (key_enc) and followed by a version suffix. key_enc preserves order and
// no key_enc is a prefix of another, so a span of user keys is a span of
// engine keys (UserSpan) and a key's versions are never split apart.
var UserKeyspace = mvcc.Keyspace{Prefix: []byte{UserPrefix}}

// UserKeyPrefix returns the engine key every version of user key k starts
// with (0x03 key_enc(k)); it sorts below every one of them.
func UserKeyPrefix(k []byte) []byte {
	return mvcc.AppendKeyPrefix(append(make([]byte, 0, 3+len(k)), UserPrefix), k)
}

// DecodeUserKey returns the user key of a versioned engine key in the user
// span (a new slice), or an error for any other key.
func DecodeUserKey(engineKey []byte) ([]byte, error) {
	if len(engineKey) == 0 || engineKey[0] != UserPrefix {
		return nil, fmt.Errorf("keys: %x is not a user key", engineKey)
	}
	k, _, err := mvcc.DecodeKey(nil, engineKey[1:])
	if err != nil {
		return nil, fmt.Errorf("keys: %x: %w", engineKey, err)
	}
	return k, nil
}

// UserSpan returns the engine span of every version of the user keys
// [start, end); an empty start means the beginning of the user key space
// and an empty end its end.
func UserSpan(start, end []byte) Span {
	s := Span{Start: []byte{UserPrefix}, End: []byte{UserPrefix + 1}}
	if len(start) != 0 {
		s.Start = UserKeyPrefix(start)
	}
	if len(end) != 0 {
		s.End = UserKeyPrefix(end)
	}
	return s
}

// MVCCStatsKey holds the mvcc.Stats of range rangeID's user data
// (rangesm's mvcc_stats.go).
func MVCCStatsKey(rangeID uint64) []byte {
	return rangeKey(RangeLocalPrefix, rangeID, suffixMVCCStats, 0)
}

// MVCCStateKey holds range rangeID's MVCC state: the frontier (the highest
// version applied and timestamp closed on the range) and the GC threshold
// (rangesm's mvcc_state.go).
func MVCCStateKey(rangeID uint64) []byte {
	return rangeKey(RangeLocalPrefix, rangeID, suffixMVCCState, 0)
}

// WithUserVersions returns o (a new Options if nil) set up for the user
// keyspace: Bloom filters on user keys without their version suffix
// (storage.Options.SplitVersionSuffix under UserPrefix), which versioned
// scans also need. Every engine holding a store opens with it.
func WithUserVersions(o *storage.Options) *storage.Options {
	if o == nil {
		o = &storage.Options{}
	}
	o.SplitVersionSuffix = true
	o.VersionedKeyPrefix = []byte{UserPrefix}
	return o
}

// Span is the half-open engine key span [Start, End).
type Span struct {
	Start, End []byte
}

// Contains reports whether key is in the span.
func (s Span) Contains(key []byte) bool {
	return bytes.Compare(key, s.Start) >= 0 && bytes.Compare(key, s.End) < 0
}

func (s Span) String() string { return fmt.Sprintf("[%x, %x)", s.Start, s.End) }
