package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
)

// Value encodings of the Raft and replica state keys (keys in raft/keys).
// They are on-disk formats: each starts with a version byte, and the
// layouts below are frozen. DO NOT CHANGE a released version; add one.
//
//	log entry       := 0x01 type:u8 term:fixed64 data      (index is in the key)
//	hard state      := 0x01 term:fixed64 vote:fixed64 commit:fixed64
//	truncated state := 0x01 index:fixed64 term:fixed64
//	applied state   := 0x02 index:uvarint term:uvarint machine:bytes  (machine: the rest)
//	                 | 0x01 index:fixed64 term:fixed64
//	replica id      := 0x01 replica_id:fixed64
//	tombstone       := 0x01 next_replica_id:fixed64
//	conf state      := raftpb.ConfState, protobuf
//	descriptor      := kvpb.RangeDescriptor, protobuf
//
// fixed64 is little-endian. type is the raftpb.EntryType value.
const stateVersion byte = 0x01

// ErrCorruptState is returned when a stored Raft or replica state record
// does not decode. The node cannot continue with that range.
var ErrCorruptState = errors.New("logstore: corrupt replica state")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptState}, args...)...)
}

// EncodeEntry appends the value encoding of e to dst.
func EncodeEntry(dst []byte, e *pb.Entry) []byte {
	dst = append(dst, stateVersion, byte(e.GetType()))
	dst = binary.LittleEndian.AppendUint64(dst, e.GetTerm())
	return append(dst, e.GetData()...)
}

// DecodeEntry decodes the entry at index stored as value. The entry's Data
// aliases value.
func DecodeEntry(index uint64, value []byte) (*pb.Entry, error) {
	if len(value) < 10 || value[0] != stateVersion {
		return nil, corruptf("log entry %d: %d bytes, version %d", index, len(value), firstByte(value))
	}
	typ := pb.EntryType(value[1])
	if _, ok := pb.EntryType_name[int32(typ)]; !ok {
		return nil, corruptf("log entry %d: unknown entry type %d", index, typ)
	}
	e := &pb.Entry{
		Index: new(index),
		Term:  new(binary.LittleEndian.Uint64(value[2:])),
		Type:  typ.Enum(),
	}
	if len(value) > 10 {
		e.Data = value[10:]
	}
	return e, nil
}

// EntrySize is the number of bytes an entry occupies in the engine and in
// the cache accounting.
func EntrySize(e *pb.Entry) int { return 10 + len(e.GetData()) }

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

func encodeUint64s(vs ...uint64) []byte {
	b := make([]byte, 1, 1+8*len(vs))
	b[0] = stateVersion
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func decodeUint64s(what string, b []byte, vs ...*uint64) error {
	if len(b) != 1+8*len(vs) || b[0] != stateVersion {
		return corruptf("%s: %d bytes, version %d", what, len(b), firstByte(b))
	}
	for i, v := range vs {
		*v = binary.LittleEndian.Uint64(b[1+8*i:])
	}
	return nil
}

// EncodeHardState returns the value encoding of hs.
func EncodeHardState(hs *pb.HardState) []byte {
	return encodeUint64s(hs.GetTerm(), hs.GetVote(), hs.GetCommit())
}

// DecodeHardState decodes a HardState value.
func DecodeHardState(b []byte) (*pb.HardState, error) {
	var term, vote, commit uint64
	if err := decodeUint64s("hard state", b, &term, &vote, &commit); err != nil {
		return nil, err
	}
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}, nil
}

// LogPosition is the (index, term) of a log entry: the truncated state (the
// last entry removed from the log) or the applied state (the last entry
// applied).
type LogPosition struct {
	Index, Term uint64
}

// Encode returns the value encoding of p.
func (p LogPosition) Encode() []byte { return encodeUint64s(p.Index, p.Term) }

// DecodeLogPosition decodes a truncated or applied state value.
func DecodeLogPosition(what string, b []byte) (LogPosition, error) {
	var p LogPosition
	err := decodeUint64s(what, b, &p.Index, &p.Term)
	return p, err
}

// appliedStateVersion is the applied state's version with the state
// machine's state (EncodeAppliedState).
const appliedStateVersion byte = 0x02

// EncodeAppliedState returns the value encoding of the applied state p
// with the state machine's own state as of p (opaque here: the range's
// MVCC state, rangesm), or, if machine is nil, of p alone (version
// 0x01, as bootstrap and a split's right-hand range write it: the state
// machine then keeps its state in its own record). One record per range
// and apply batch instead of two (docs/replication.md, "Per-range state
// in the engine").
func EncodeAppliedState(p LogPosition, machine []byte) []byte {
	if machine == nil {
		return p.Encode()
	}
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(machine))
	b = append(b, appliedStateVersion)
	b = binary.AppendUvarint(b, p.Index)
	b = binary.AppendUvarint(b, p.Term)
	return append(b, machine...)
}

// DecodeAppliedState decodes an applied state value; hasMachine is false
// for a version 0x01 value, which holds no state machine state. machine
// aliases b.
func DecodeAppliedState(b []byte) (p LogPosition, machine []byte, hasMachine bool, err error) {
	if len(b) > 0 && b[0] == appliedStateVersion {
		rest := b[1:]
		var n int
		if p.Index, n = binary.Uvarint(rest); n <= 0 {
			return LogPosition{}, nil, false, corruptf("applied state: bad index")
		}
		rest = rest[n:]
		if p.Term, n = binary.Uvarint(rest); n <= 0 {
			return LogPosition{}, nil, false, corruptf("applied state: bad term")
		}
		return p, rest[n:], true, nil
	}
	p, err = DecodeLogPosition("applied state", b)
	return p, nil, false, err
}

// EncodeReplicaID returns the value encoding of a replica ID (or, for a
// tombstone, of the next replica ID the node may accept).
func EncodeReplicaID(id uint64) []byte { return encodeUint64s(id) }

// DecodeReplicaID decodes a replica ID or tombstone value.
func DecodeReplicaID(what string, b []byte) (uint64, error) {
	var id uint64
	err := decodeUint64s(what, b, &id)
	return id, err
}

// EncodeConfState returns the value encoding of cs.
func EncodeConfState(cs *pb.ConfState) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(cs)
}

// DecodeConfState decodes a ConfState value.
func DecodeConfState(b []byte) (*pb.ConfState, error) {
	cs := &pb.ConfState{}
	if err := proto.Unmarshal(b, cs); err != nil {
		return nil, corruptf("conf state: %v", err)
	}
	return cs, nil
}

// EncodeDescriptor returns the value encoding of d.
func EncodeDescriptor(d *kvpb.RangeDescriptor) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(d)
}

// DecodeDescriptor decodes a RangeDescriptor value.
func DecodeDescriptor(b []byte) (*kvpb.RangeDescriptor, error) {
	d := &kvpb.RangeDescriptor{}
	if err := proto.Unmarshal(b, d); err != nil {
		return nil, corruptf("range descriptor: %v", err)
	}
	return d, nil
}
