package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/shaledb/shale/api/kvpb"
)

// How shalectl takes and shows bytes (the root command's help repeats it):
//
//   - keys and values on the command line are text, or hex with --hex;
//   - a value can instead come from stdin (VALUE "-") or a file (--file),
//     taken byte for byte, never decoded: the way to pass binary data or a
//     value too long for an argument list;
//   - text output shows bytes as they are when they are printable UTF-8,
//     else Go-quoted; with --hex always hex; get --raw writes the value's
//     bytes alone;
//   - --json output follows the layout in jsonout.go.

// parseArg decodes a key or value given on the command line.
func (g *globals) parseArg(name, s string) ([]byte, error) {
	if !g.hex {
		return []byte(s), nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not hex (--hex): %v", name, s, err)
	}
	return b, nil
}

// display renders bytes for text output: as they are when they are
// printable UTF-8, Go-quoted otherwise, hex with --hex.
func (g *globals) display(b []byte) string {
	if g.hex {
		return hex.EncodeToString(b)
	}
	if printable(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// printable says whether b is valid UTF-8 of printable characters (spaces
// included): the bytes that text and JSON output show as they are.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// span renders a range's span for text output: meta, or [start, end) with
// each bound shown by display and -inf/+inf for the open ends.
func (g *globals) span(d *kvpb.RangeDescriptor) string {
	if d.GetRangeId() == 1 {
		return "meta"
	}
	s, e := "-inf", "+inf"
	if len(d.GetStartKey()) > 0 {
		s = g.display(d.GetStartKey())
	}
	if len(d.GetEndKey()) > 0 {
		e = g.display(d.GetEndKey())
	}
	return "[" + s + ", " + e + ")"
}

// entry is the JSON form of a key and, withValue, its value.
func (g *globals) entry(key, value []byte, withValue bool) object {
	o := object{}
	g.addBytes(&o, "key", key)
	if withValue {
		g.addBytes(&o, "value", value)
	}
	return o
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
