package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"
)

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

// jsonEntry is the JSON form of a key and value. Bytes that are valid
// UTF-8 appear as strings; others as base64 in the *_base64 fields (JSON
// strings cannot carry arbitrary bytes).
type jsonEntry struct {
	Key         *string `json:"key,omitempty"`
	KeyBase64   *string `json:"key_base64,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
	Found       *bool   `json:"found,omitempty"`
}

func (g *globals) jsonBytes(b []byte) (str, b64 *string) {
	switch {
	case g.hex:
		s := hex.EncodeToString(b)
		return &s, nil
	case utf8.Valid(b):
		s := string(b)
		return &s, nil
	default:
		s := base64.StdEncoding.EncodeToString(b)
		return nil, &s
	}
}

func (g *globals) entry(key, value []byte, withValue bool) jsonEntry {
	var e jsonEntry
	e.Key, e.KeyBase64 = g.jsonBytes(key)
	if withValue {
		e.Value, e.ValueBase64 = g.jsonBytes(value)
	}
	return e
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
