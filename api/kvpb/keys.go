package kvpb

// Key helpers both sides of the wire use, so that a client routes a
// request to the range the node will check it against.

// MutationKey returns the key a mutation routes by: the key a Put or a
// Delete writes, the start of a DeleteRange (nil for an empty mutation).
func MutationKey(m *Mutation) []byte {
	switch op := m.GetOp().(type) {
	case *Mutation_Put:
		return op.Put.GetKey()
	case *Mutation_Delete:
		return op.Delete.GetKey()
	case *Mutation_DeleteRange:
		return op.DeleteRange.GetStartKey()
	}
	return nil
}

// KeyBefore returns a key that routes a reverse scan ending at k (exclusive)
// to the range holding the last key before k: k minus a trailing 0x00, or k
// with its last byte decremented and 0xff appended. The exact predecessor
// of a byte string does not exist, but any key in [predecessor-ish, k) lies
// in that range unless a range boundary falls exactly there, which the
// node reports (RangeKeyMismatch). KeyBefore of an empty k is k.
func KeyBefore(k []byte) []byte {
	if len(k) == 0 {
		return k
	}
	if k[len(k)-1] == 0 {
		return k[:len(k)-1]
	}
	b := append([]byte{}, k...)
	b[len(b)-1]--
	return append(b, 0xff)
}
