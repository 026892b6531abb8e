package command

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/hlc"
)

// Protected timestamps (docs/versions.md, "Protected timestamps"): meta
// commands that create, refresh and remove the records the GC queue
// honours.
//
//	protect := id:uvarint timestamp start:bytes end:bytes expiry:fixed64
//	           window:uvarint description:bytes                    (kind 40)
//	           (id 0: create a record, meta allocates its ID; any other
//	           id: refresh that record's expiry, the rest is ignored)
//	release := id:uvarint flags:u8 [expired_by:fixed64 if flags bit 0] (kind 41)
//	           flags: bit 0 only if the record's expiry is at or before
//	           expired_by (the meta leader removing an expired record)
//
// expiry and expired_by are Unix nanoseconds; window is the proposer's
// retention window in nanoseconds, carried so that every replica checks
// the record's timestamp against the same bound; end empty is the key
// space's end.

// Protect is the body of a KindProtect or KindRelease.
type Protect struct {
	// ID names the record (KindProtect: 0 asks meta to allocate one and
	// create the record; another ID refreshes that record's Expiry).
	ID uint64
	// Timestamp is the protected timestamp: GC keeps every version a
	// read at it sees, on every range overlapping [Start, End).
	Timestamp hlc.Timestamp
	// Start and End bound the user keys protected; an empty End is the
	// key space's end.
	Start, End []byte
	// Expiry is the wall time (Unix nanoseconds) the record stops
	// protecting.
	Expiry int64
	// Window is the proposer's retention window (nanoseconds): a record
	// whose Timestamp is older than the proposal timestamp minus half of
	// it is refused.
	Window int64
	// Description says who holds the record (e.g. "backup b1").
	Description string
	// ExpiredBy, if not 0, makes a KindRelease conditional: the record
	// goes only if its Expiry is at or before it.
	ExpiredBy int64
}

// release flags.
const releaseIfExpired byte = 1 << 0

// MaxProtectDescription bounds a protection's description.
const MaxProtectDescription = 256

// CheckProtectSpan validates a protected span: End empty (the key space's
// end) or above Start.
func CheckProtectSpan(start, end []byte) error {
	if len(end) != 0 && bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("protected span [%q, %q) is empty or inverted", start, end)
	}
	return nil
}

func appendProtect(dst []byte, c *Command) ([]byte, error) {
	p := &c.Protect
	switch c.Kind {
	case KindProtect:
		if p.ID == 0 {
			if !p.Timestamp.Valid() || p.Timestamp.IsZero() {
				return nil, fmt.Errorf("command: Protect at timestamp %s", p.Timestamp)
			}
			if err := CheckProtectSpan(p.Start, p.End); err != nil {
				return nil, fmt.Errorf("command: %w", err)
			}
			if p.Window <= 0 {
				return nil, fmt.Errorf("command: Protect with a retention window of %d", p.Window)
			}
		}
		if p.Expiry <= 0 {
			return nil, fmt.Errorf("command: Protect with expiry %d", p.Expiry)
		}
		if len(p.Description) > MaxProtectDescription {
			return nil, fmt.Errorf("command: Protect description of %d bytes (at most %d)", len(p.Description), MaxProtectDescription)
		}
		dst = binary.AppendUvarint(dst, p.ID)
		dst = p.Timestamp.AppendEncode(dst)
		dst = appendBytes(dst, p.Start)
		dst = appendBytes(dst, p.End)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(p.Expiry))
		dst = binary.AppendUvarint(dst, uint64(max(p.Window, 0)))
		dst = appendBytes(dst, []byte(p.Description))
	case KindRelease:
		if p.ID == 0 {
			return nil, errors.New("command: Release of protection 0")
		}
		dst = binary.AppendUvarint(dst, p.ID)
		if p.ExpiredBy != 0 {
			dst = append(dst, releaseIfExpired)
			dst = binary.LittleEndian.AppendUint64(dst, uint64(p.ExpiredBy))
		} else {
			dst = append(dst, 0)
		}
	}
	return dst, nil
}

// protect decodes the body of a KindProtect or KindRelease into c.
func (d *decoder) protect(c *Command) {
	p := &c.Protect
	p.ID = d.uvarint()
	switch c.Kind {
	case KindProtect:
		p.Timestamp = d.timestamp()
		p.Start = d.bytes()
		p.End = d.bytes()
		p.Expiry = int64(d.fixed64())
		w := d.uvarint()
		p.Description = string(d.bytes())
		if d.err != nil {
			return
		}
		if w > 1<<62 || p.Expiry <= 0 {
			d.fail("Protect with window %d and expiry %d", w, p.Expiry)
		}
		p.Window = int64(w)
	case KindRelease:
		flags := d.byte()
		if flags&^releaseIfExpired != 0 {
			d.fail("unknown Release flags %#x", flags)
		}
		if flags&releaseIfExpired != 0 {
			p.ExpiredBy = int64(d.fixed64())
			if d.err == nil && p.ExpiredBy == 0 {
				d.fail("Release if expired by 0")
			}
		}
		if d.err == nil && p.ID == 0 {
			d.fail("Release of protection 0")
		}
	}
}
