package sim

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// regState is one key's value: absent, or present with value.
type regState struct {
	found bool
	value string
}

type regInput struct {
	Kind         opKind
	Key          string
	Value        string // put, cas: the value written
	Expect       string // cas
	ExpectAbsent bool   // cas
}

type regOutput struct {
	Unknown bool // a write whose outcome is unknown
	Found   bool
	Value   string
	Swapped bool
}

// registerModel is one key under get, put, compare-and-swap and delete
// (a delete-range appears in the history of each key it covers). A write
// whose outcome is unknown returns after everything else: it may then be
// linearized anywhere after its call, including where it has no visible
// effect.
var registerModel = porcupine.Model{
	Init: func() interface{} { return regState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		switch in.Kind {
		case opGet:
			return out.Found == s.found && (!s.found || out.Value == s.value), s
		case opPut:
			return true, regState{found: true, value: in.Value}
		case opDeleteRange:
			return true, regState{}
		case opCAS:
			matches := (in.ExpectAbsent && !s.found) || (!in.ExpectAbsent && s.found && s.value == in.Expect)
			next := s
			if matches {
				next = regState{found: true, value: in.Value}
			}
			switch {
			case out.Unknown:
				return true, next
			case out.Swapped:
				return matches, next
			default:
				return !matches && out.Found == s.found && (!s.found || out.Value == s.value), s
			}
		}
		return false, s
	},
	Equal: func(a, b interface{}) bool { return a.(regState) == b.(regState) },
	Hash: func(state interface{}) uint64 {
		s := state.(regState)
		h := fnv.New64a()
		if s.found {
			h.Write([]byte{1})
			h.Write([]byte(s.value))
		}
		return h.Sum64()
	},
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range history {
			k := o.Input.(regInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], o)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(regInput), output.(regOutput)
		res := "?"
		if !out.Unknown {
			res = "nil"
			if out.Found {
				res = fmt.Sprintf("%q", out.Value)
			}
		}
		switch in.Kind {
		case opGet:
			return fmt.Sprintf("get(%s) -> %s", in.Key, res)
		case opPut:
			return fmt.Sprintf("put(%s, %q)", in.Key, in.Value)
		case opDeleteRange:
			return fmt.Sprintf("delete(%s)", in.Key)
		default:
			cond := fmt.Sprintf("%q", in.Expect)
			if in.ExpectAbsent {
				cond = "absent"
			}
			switch {
			case out.Unknown:
			case out.Swapped:
				res = "ok"
			default:
				res = "failed, was " + res
			}
			return fmt.Sprintf("cas(%s, %s -> %q) %s", in.Key, cond, in.Value, res)
		}
	},
}
