package client

import (
	"bytes"
	"context"
	"fmt"
)

// The one-call conditional transaction (as etcd's Txn): compare the
// values or versions of several keys, then apply one list of operations
// if every comparison holds and another if not, atomically. It is a
// transaction (Txn) whose function reads the compared keys at its
// snapshot and buffers the branch's writes: the commit fails and the
// whole call runs again if a compared key changes before it commits.

// CmpOp is how a comparison relates a key's value or version to its
// target.
type CmpOp uint8

const (
	CmpEqual CmpOp = iota
	CmpNotEqual
	CmpLess
	CmpGreater
)

func (o CmpOp) String() string {
	switch o {
	case CmpEqual:
		return "="
	case CmpNotEqual:
		return "!="
	case CmpLess:
		return "<"
	case CmpGreater:
		return ">"
	}
	return fmt.Sprintf("CmpOp(%d)", uint8(o))
}

// Compare is one condition of CondTxn.
type Compare struct {
	Key []byte
	Op  CmpOp
	// ByVersion compares the key's newest version with Version (the zero
	// Timestamp for a missing key, which is below every version);
	// otherwise its value with Value, bytewise (a missing key is never
	// equal, less or greater: only CmpNotEqual holds for it).
	ByVersion bool
	Value     []byte
	Version   Timestamp
}

// CompareValue holds when key's value relates to value as op says.
func CompareValue(key []byte, op CmpOp, value []byte) Compare {
	return Compare{Key: key, Op: op, Value: value}
}

// CompareVersion holds when key's newest version relates to v as op says;
// a missing key's version is the zero Timestamp (so CompareVersion(key,
// CmpEqual, Timestamp{}) holds for a missing key only).
func CompareVersion(key []byte, op CmpOp, v Timestamp) Compare {
	return Compare{Key: key, Op: op, ByVersion: true, Version: v}
}

// holds evaluates the comparison against a read of its key.
func (c Compare) holds(r GetResult) bool {
	if c.ByVersion {
		v := r.Version
		if !r.Found {
			v = Timestamp{}
		}
		switch c.Op {
		case CmpEqual:
			return v == c.Version
		case CmpNotEqual:
			return v != c.Version
		case CmpLess:
			return v.Less(c.Version)
		case CmpGreater:
			return c.Version.Less(v)
		}
		return false
	}
	if !r.Found {
		return c.Op == CmpNotEqual
	}
	cmp := bytes.Compare(r.Value, c.Value)
	switch c.Op {
	case CmpEqual:
		return cmp == 0
	case CmpNotEqual:
		return cmp != 0
	case CmpLess:
		return cmp < 0
	case CmpGreater:
		return cmp > 0
	}
	return false
}

// TxnOp is one operation of a CondTxn branch: OpGet, OpPut, OpDelete,
// OpDeleteRange.
type TxnOp struct {
	kind     txnOpKind
	key, end []byte
	value    []byte
}

type txnOpKind uint8

const (
	txnOpGet txnOpKind = iota + 1
	txnOpPut
	txnOpDelete
	txnOpDeleteRange
)

// OpGet reads key at the transaction's snapshot (after the branch's
// earlier writes); its answer is in CondResult.Gets.
func OpGet(key []byte) TxnOp { return TxnOp{kind: txnOpGet, key: key} }

// OpPut sets key to value.
func OpPut(key, value []byte) TxnOp { return TxnOp{kind: txnOpPut, key: key, value: value} }

// OpDelete removes key.
func OpDelete(key []byte) TxnOp { return TxnOp{kind: txnOpDelete, key: key} }

// OpDeleteRange removes every key in [start, end).
func OpDeleteRange(start, end []byte) TxnOp {
	return TxnOp{kind: txnOpDeleteRange, key: start, end: end}
}

// CondResult is what CondTxn did.
type CondResult struct {
	// Succeeded: every comparison held and the then-operations ran;
	// otherwise the else-operations did.
	Succeeded bool
	// Gets answers the branch's OpGets, in order.
	Gets []GetResult
}

// CondTxn evaluates every comparison at one snapshot and runs then if all
// hold, els otherwise, atomically with the comparisons: it commits only
// if no compared key (nor any key an OpGet read) changed since the
// snapshot, and runs again at a new snapshot if one did (Txn's retries).
// It needs at least one comparison or operation. Errors are Txn's (a
// DeleteRange across ranges fails with ErrTxnSpansRanges).
func (c *Client) CondTxn(ctx context.Context, cmps []Compare, then, els []TxnOp) (CondResult, error) {
	for i, cm := range cmps {
		if cm.Op > CmpGreater {
			return CondResult{}, &Error{Op: "CondTxn", Msg: fmt.Sprintf("compare %d: unknown operator %v", i, cm.Op), kind: ErrInvalidArgument}
		}
		if len(cm.Key) == 0 {
			return CondResult{}, &Error{Op: "CondTxn", Msg: fmt.Sprintf("compare %d: empty key", i), kind: ErrInvalidArgument}
		}
	}
	for i, op := range append(append([]TxnOp{}, then...), els...) {
		if op.kind == 0 {
			return CondResult{}, &Error{Op: "CondTxn", Msg: fmt.Sprintf("operation %d: the zero TxnOp (make operations with OpGet, OpPut, OpDelete, OpDeleteRange)", i), kind: ErrInvalidArgument}
		}
	}
	var res CondResult
	err := c.Txn(ctx, func(tx *Tx) error {
		res = CondResult{Succeeded: true}
		if len(cmps) > 0 {
			keys := make([][]byte, len(cmps))
			for i, cm := range cmps {
				keys[i] = cm.Key
			}
			rs, err := tx.BatchGet(ctx, keys)
			if err != nil {
				return err
			}
			for i, cm := range cmps {
				if !cm.holds(rs[i]) {
					res.Succeeded = false
					break
				}
			}
		}
		branch := then
		if !res.Succeeded {
			branch = els
		}
		for _, op := range branch {
			var err error
			switch op.kind {
			case txnOpGet:
				var r GetResult
				r.Value, r.Found, err = tx.Get(ctx, op.key)
				res.Gets = append(res.Gets, r)
			case txnOpPut:
				err = tx.Put(op.key, op.value)
			case txnOpDelete:
				err = tx.Delete(op.key)
			case txnOpDeleteRange:
				err = tx.DeleteRange(op.key, op.end)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return CondResult{}, err
	}
	return res, nil
}
