package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/shaledb/shale/client"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The one JSON layout of every command's --json output (docs/operations.md,
// "shalectl output"):
//
//   - field names are lowerCamelCase;
//   - numbers (IDs, counts, sizes, terms, rates) are JSON numbers, never
//     strings, 64-bit values included;
//   - a byte string NAME (a key, a value, a span's start or end) appears as
//     exactly one field: "NAME" holding the text when the bytes are
//     printable UTF-8, else "NAMEBase64" holding standard base64; with
//     --hex always "NAMEHex" holding lowercase hex;
//   - enums are lower-case words ("live", "voter");
//   - every field of a message is present, zero values included.
//
// object keeps fields in the order they were added, so that the output
// reads like the text tables.

// field is one name and value of an object.
type field struct {
	name  string
	value any
}

// object is a JSON object whose fields keep their order.
type object []field

func (o *object) add(name string, v any) { *o = append(*o, field{name, v}) }

// addBytes adds b under the layout's name for a byte string.
func (g *globals) addBytes(o *object, name string, b []byte) {
	switch {
	case g.hex:
		o.add(name+"Hex", fmt.Sprintf("%x", b))
	case printable(b):
		o.add(name, string(b))
	default:
		o.add(name+"Base64", b) // encoding/json writes []byte as base64
	}
}

// MarshalJSON writes the fields in order.
func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(f.name)
		buf.Write(k)
		buf.WriteByte(':')
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.name, err)
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// protoObject renders a protobuf message in the layout. It walks the
// message by reflection so that every command, whatever it prints, gets
// the same rules.
func (g *globals) protoObject(m proto.Message) object {
	if m == nil {
		return object{}
	}
	return g.messageObject(m.ProtoReflect())
}

func (g *globals) messageObject(m protoreflect.Message) object {
	o := object{}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := fd.JSONName()
		v := m.Get(fd)
		switch {
		case fd.IsList():
			list := v.List()
			if fd.Kind() == protoreflect.BytesKind {
				// A list of byte strings: one object per element.
				items := make([]object, list.Len())
				for j := range items {
					g.addBytes(&items[j], "value", list.Get(j).Bytes())
				}
				o.add(name, items)
				continue
			}
			items := make([]any, list.Len())
			for j := range items {
				items[j] = g.scalar(fd, list.Get(j))
			}
			o.add(name, items)
		case fd.IsMap():
			mo := object{}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				mo.add(k.String(), g.scalar(fd.MapValue(), mv))
				return true
			})
			o.add(name, mo)
		case fd.Kind() == protoreflect.BytesKind:
			g.addBytes(&o, name, v.Bytes())
		default:
			o.add(name, g.scalar(fd, v))
		}
	}
	return o
}

// scalar renders one non-bytes value (a message, enum or number).
func (g *globals) scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if !v.Message().IsValid() {
			return nil
		}
		return g.messageObject(v.Message())
	case protoreflect.EnumKind:
		return enumWord(fd.Enum(), v.Enum())
	case protoreflect.BytesKind:
		var o object
		g.addBytes(&o, "value", v.Bytes())
		return o
	default:
		return v.Interface()
	}
}

// enumWord is an enum value's name without its type's prefix, lower-case:
// NODE_STATE_LIVE -> "live", REPLICA_TYPE_VOTER -> "voter".
func enumWord(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) string {
	vd := ed.Values().ByNumber(n)
	if vd == nil {
		return fmt.Sprint(int32(n))
	}
	return strings.ToLower(strings.TrimPrefix(string(vd.Name()), screamingSnake(string(ed.Name()))+"_"))
}

// screamingSnake is NodeState -> NODE_STATE.
func screamingSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// timestampJSON is a timestamp in the layout, as protoObject renders a
// kvpb.Timestamp: {"wallNanos": N, "logical": L}, or null for the zero
// Timestamp (none).
func timestampJSON(ts client.Timestamp) any {
	if ts.IsZero() {
		return nil
	}
	return object{{"wallNanos", ts.WallTime}, {"logical", ts.Logical}}
}

// printProto prints m as one JSON document in the layout.
func (g *globals) printProto(out io.Writer, m proto.Message) error {
	return writeJSON(out, g.protoObject(m))
}
