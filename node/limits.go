package node

import "fmt"

// Limits bound what one request may carry. They are part of the wire
// protocol (docs/wire-protocol.md, "Limits"): a request over any of them is
// refused with InvalidArgument and a LimitExceeded detail naming the limit,
// and nothing is written.
//
// The write limits keep every write, once it becomes one engine batch (and
// later one Raft entry), under MaxWriteBytes: a command that large can
// always be logged, replicated and replayed.
type Limits struct {
	// MaxKeySize bounds every key, and every scan or range bound (8 KiB).
	MaxKeySize int
	// MaxValueSize bounds every value (4 MiB).
	MaxValueSize int
	// MaxBatchOps bounds the mutations of one Batch and the keys of one
	// BatchGet (10,000).
	MaxBatchOps int
	// MaxWriteBytes bounds the key and value bytes of one write request
	// (8 MiB).
	MaxWriteBytes int
	// MaxScanLimit bounds a Scan's limit (10,000); DefaultScanLimit is used
	// when the request's limit is 0 (1,000).
	MaxScanLimit     uint32
	DefaultScanLimit uint32
	// MaxScanBytes bounds a Scan's max_bytes (16 MiB); DefaultScanBytes is
	// used when it is 0 (4 MiB). A scan always returns at least one entry
	// when one exists, so a response may exceed max_bytes by one entry.
	MaxScanBytes     uint64
	DefaultScanBytes uint64
	// MaxResponseBytes bounds the values a BatchGet returns (32 MiB).
	MaxResponseBytes int
}

// DefaultLimits returns the documented default limits.
func DefaultLimits() Limits {
	return Limits{
		MaxKeySize:       8 << 10,
		MaxValueSize:     4 << 20,
		MaxBatchOps:      10_000,
		MaxWriteBytes:    8 << 20,
		MaxScanLimit:     10_000,
		DefaultScanLimit: 1_000,
		MaxScanBytes:     16 << 20,
		DefaultScanBytes: 4 << 20,
		MaxResponseBytes: 32 << 20,
	}
}

// Validate checks that the limits are usable together.
func (l Limits) Validate() error {
	switch {
	case l.MaxKeySize <= 0 || l.MaxValueSize <= 0 || l.MaxBatchOps <= 0 || l.MaxWriteBytes <= 0 ||
		l.MaxScanLimit == 0 || l.DefaultScanLimit == 0 || l.MaxScanBytes == 0 || l.DefaultScanBytes == 0 ||
		l.MaxResponseBytes <= 0:
		return fmt.Errorf("node: limits must all be positive: %+v", l)
	case l.MaxKeySize+l.MaxValueSize > l.MaxWriteBytes:
		return fmt.Errorf("node: MaxWriteBytes %d is below MaxKeySize %d + MaxValueSize %d: a single Put could not be written",
			l.MaxWriteBytes, l.MaxKeySize, l.MaxValueSize)
	case l.DefaultScanLimit > l.MaxScanLimit || l.DefaultScanBytes > l.MaxScanBytes:
		return fmt.Errorf("node: scan defaults exceed their maximums: %+v", l)
	case l.MaxValueSize > l.MaxResponseBytes:
		return fmt.Errorf("node: MaxResponseBytes %d is below MaxValueSize %d", l.MaxResponseBytes, l.MaxValueSize)
	}
	return nil
}

// maxRecvMsgSize is the gRPC message size the server accepts: the largest
// write request the limits allow plus its protobuf framing. A mutation's
// framing (the Mutation and op messages' tags and lengths, the key's and the
// value's) is under 32 bytes; the header and request fields fit in the rest.
func (l Limits) maxRecvMsgSize() int {
	const perOpFraming = 32
	// Twice the write limit, so that a request somewhat over it is still
	// read and refused with a LimitExceeded detail naming the limit.
	return 2*l.MaxWriteBytes + l.MaxBatchOps*perOpFraming + 64<<10
}
