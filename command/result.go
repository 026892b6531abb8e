package command

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/hlc"
)

// Result is the outcome of applying one command. It is produced
// identically on every replica and, for deduplicated writes, stored so a
// retry returns it again: its encoding is frozen too.
//
//	result := version:u8 code:u8 flags:u8 id:uvarint value:bytes message:bytes
//	          [version_written:timestamp if flags bit 2]
//	          [current_version:timestamp current_created:timestamp if flags bit 3]
//	version := 0x02 (0x01, without the timestamps, is still read)
//	flags   := bit 0 succeeded (CAS), bit 1 found (CAS), bit 2 written,
//	           bit 3 current
//	id      := the node ID a PutNode registered, the range ID an
//	           AllocRangeID allocated, the window a TSOWindow found,
//	           the versions a GC deleted, the ID of the protection a
//	           Protect created or refreshed (0 otherwise)
//	value   := the CAS key's value before the command, the user key a
//	           GC's next chunk starts at, the key a TxnCommit found
//	           changed, the key whose intent a write met (empty
//	           otherwise)
//	message := why the command was rejected (code != 0)
//	timestamp := hlc.Encode (12 bytes)
type Result struct {
	// Code is CodeOK or why the command was rejected. A rejected command
	// changed nothing, except a TxnWrite's folded resolutions
	// (TxnWrite.Resolve), which apply whatever the write's outcome.
	Code Code
	// Message explains a rejection.
	Message string
	// Succeeded, Found and Value report a CAS: whether it swapped, and the
	// key's value before the command. For a GC, Found says the span has
	// more to collect and Value is the user key to resume at.
	Succeeded bool
	Found     bool
	Value     []byte
	// NodeID is the ID a PutNode registered, the range ID an
	// AllocRangeID allocated, the persisted window (Unix nanoseconds) a
	// TSOWindow found before it applied, or the number of versions a GC
	// deleted.
	NodeID uint64
	// Version is the version a client write applied at (every key it
	// wrote has it), zero for other commands and a CAS that did not swap.
	// For a GC, it is the lowest threshold at which a version the GC kept
	// would be collected (mvcc.GCResult.Collectible; zero: none would).
	Version hlc.Timestamp
	// CurrentVersion and CurrentCreated report a CAS key's newest version
	// before the command and the version that created it (set when
	// Found).
	CurrentVersion, CurrentCreated hlc.Timestamp
}

// Code classifies a deterministic rejection. DO NOT CHANGE the values:
// they are stored in dedup records.
type Code uint8

const (
	// CodeOK: the command applied.
	CodeOK Code = 0
	// CodeKeyOutOfRange: a key is outside the range's current span (the
	// range split or merged since the proposal). Nothing was written.
	CodeKeyOutOfRange Code = 1
	// CodeDedupWindowExpired: a retry arrived after its client's dedup
	// records were collected, so whether the first attempt applied is no
	// longer known. Nothing was written.
	CodeDedupWindowExpired Code = 2
	// CodeDescriptorChanged: a ChangeReplicas computed from an older
	// descriptor. Nothing was changed.
	CodeDescriptorChanged Code = 3
	// CodeMalformed: the command did not decode or was invalid.
	CodeMalformed Code = 4
	// CodeNotMeta: a meta command reached a range other than meta.
	CodeNotMeta Code = 5
	// CodeRangeFrozen: the range is frozen for a merge into its left-hand
	// neighbour and takes no writes or changes. Nothing was written; the
	// request may be retried (after the merge, on the merged range).
	CodeRangeFrozen Code = 6
	// CodeReadChanged: a TxnCommit read a key that has a version above
	// its read timestamp (or the range's history below it was collected):
	// the transaction's snapshot is out of date. Nothing was written; the
	// transaction may run again at a new snapshot. Value is the key.
	CodeReadChanged Code = 7
	// CodeLeaseNotFound: the lease named does not exist (never granted,
	// expired or revoked). Nothing was written.
	CodeLeaseNotFound Code = 8
	// CodeLeaseWindowPassed: a LeasePut would have applied past its
	// attach window (docs/leases.md): the lease may have ended meanwhile.
	// Nothing was written.
	CodeLeaseWindowPassed Code = 9
	// CodeLeaseExists: a LeaseGrant named a lease ID already in use.
	CodeLeaseExists Code = 10
	// CodeLeaseStaleExpiry: a lease expiry appended in another Raft term
	// than the one its leader decided it in. Nothing was changed.
	CodeLeaseStaleExpiry Code = 11
	// CodeIntentConflict: a key the command writes, or a key or span a
	// transaction read, holds an intent of another transaction (a
	// transaction across ranges not yet resolved; docs/transactions.md,
	// "Readers and writers that meet an intent"). Nothing was written;
	// Value is the key. The request may be retried once the intent is
	// resolved.
	CodeIntentConflict Code = 12
	// CodeProtectionNotFound: a Protect refresh or a Release named a
	// protection that does not exist (never created, released, or
	// expired). Nothing was changed.
	CodeProtectionNotFound Code = 40
	// CodeProtectionTooOld: a Protect's timestamp is older than its
	// proposal timestamp minus half the retention window: GC may already
	// have passed it (docs/versions.md, "Protected timestamps"). Nothing
	// was written.
	CodeProtectionTooOld Code = 41
)

func (c Code) String() string {
	switch c {
	case CodeOK:
		return "ok"
	case CodeKeyOutOfRange:
		return "key out of range"
	case CodeDedupWindowExpired:
		return "dedup window expired"
	case CodeDescriptorChanged:
		return "descriptor changed"
	case CodeMalformed:
		return "malformed command"
	case CodeNotMeta:
		return "not the meta range"
	case CodeRangeFrozen:
		return "range frozen for a merge"
	case CodeLeaseNotFound:
		return "lease not found"
	case CodeLeaseWindowPassed:
		return "lease attach window passed"
	case CodeLeaseExists:
		return "lease exists"
	case CodeLeaseStaleExpiry:
		return "lease expiry from another term"
	case CodeReadChanged:
		return "read changed"
	case CodeIntentConflict:
		return "intent conflict"
	case CodeProtectionNotFound:
		return "protection not found"
	case CodeProtectionTooOld:
		return "protected timestamp too old"
	}
	return fmt.Sprintf("Code(%d)", uint8(c))
}

const (
	resultVersion  byte = 0x02
	resultVersion1 byte = 0x01
)

const (
	resultSucceeded byte = 1 << 0
	resultFound     byte = 1 << 1
	resultWritten   byte = 1 << 2
	resultCurrent   byte = 1 << 3
)

// Encode appends the encoding of r to dst.
func (r *Result) Encode(dst []byte) []byte {
	var flags byte
	if r.Succeeded {
		flags |= resultSucceeded
	}
	if r.Found {
		flags |= resultFound
	}
	if !r.Version.IsZero() {
		flags |= resultWritten
	}
	if !r.CurrentVersion.IsZero() {
		flags |= resultCurrent
	}
	dst = append(dst, resultVersion, byte(r.Code), flags)
	dst = binary.AppendUvarint(dst, r.NodeID)
	dst = appendBytes(dst, r.Value)
	dst = appendBytes(dst, []byte(r.Message))
	if flags&resultWritten != 0 {
		dst = r.Version.AppendEncode(dst)
	}
	if flags&resultCurrent != 0 {
		dst = r.CurrentVersion.AppendEncode(dst)
		dst = r.CurrentCreated.AppendEncode(dst)
	}
	return dst
}

// DecodeResult decodes a result. Value aliases data.
func DecodeResult(data []byte) (Result, error) {
	var r Result
	if len(data) < 3 {
		return r, fmt.Errorf("%w: result of %d bytes", ErrMalformed, len(data))
	}
	v := data[0]
	if v != resultVersion && v != resultVersion1 {
		return r, fmt.Errorf("%w %d in a result", ErrUnknownVersion, v)
	}
	r.Code = Code(data[1])
	flags := data[2]
	known := resultSucceeded | resultFound
	if v != resultVersion1 {
		known |= resultWritten | resultCurrent
	}
	if flags&^known != 0 {
		return r, fmt.Errorf("%w: unknown result flags %#x", ErrMalformed, flags)
	}
	r.Succeeded = flags&resultSucceeded != 0
	r.Found = flags&resultFound != 0
	d := decoder{buf: data[3:]}
	r.NodeID = d.uvarint()
	r.Value = d.bytes()
	r.Message = string(d.bytes())
	if flags&resultWritten != 0 {
		r.Version = d.timestamp()
	}
	if flags&resultCurrent != 0 {
		r.CurrentVersion = d.timestamp()
		r.CurrentCreated = d.timestamp()
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail("%d trailing bytes in a result", len(d.buf))
	}
	return r, d.err
}

// Err returns nil for CodeOK and a *RejectedError otherwise.
func (r *Result) Err() error {
	if r.Code == CodeOK {
		return nil
	}
	return &RejectedError{Code: r.Code, Message: r.Message}
}

// RejectedError is a command that was applied as a deterministic
// rejection: every replica refused it the same way and nothing changed.
type RejectedError struct {
	Code    Code
	Message string
}

func (e *RejectedError) Error() string {
	if e.Message == "" {
		return "command rejected: " + e.Code.String()
	}
	return "command rejected: " + e.Code.String() + ": " + e.Message
}

// RejectionCode returns the code of a *RejectedError in err's chain, or
// CodeOK if there is none.
func RejectionCode(err error) Code {
	var re *RejectedError
	if errors.As(err, &re) {
		return re.Code
	}
	return CodeOK
}
