package jepsen

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// regState is one key's value in the model: absent, or present with value.
type regState struct {
	found bool
	value string
}

// registerModel is the sequential specification of one key under get, put
// and compare-and-swap. The checker partitions the history by key, so the
// state is a single register.
//
// An indeterminate write (put or CAS whose outcome is unknown) is recorded
// with a return time after every other operation, as porcupine requires:
// it may then be linearized anywhere after its call, including after
// everything else, where it has no visible effect, which is how "it may
// never have happened" is expressed. Its step applies the write (if the
// CAS's condition holds) and accepts any output.
var registerModel = porcupine.Model{
	Init: func() interface{} { return regState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		switch in.Kind {
		case opGet:
			if out.Unknown {
				return true, s
			}
			return out.Found == s.found && (!s.found || out.Value == s.value), s
		case opPut:
			return true, regState{found: true, value: in.Value}
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
				// A failed comparison reports the value that failed it.
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
		res := ""
		switch {
		case out.Unknown:
			res = "?"
		case in.Kind == opGet || (in.Kind == opCAS && !out.Swapped):
			res = "nil"
			if out.Found {
				res = fmt.Sprintf("%q", out.Value)
			}
		}
		switch in.Kind {
		case opGet:
			return fmt.Sprintf("get(%s) -> %s", in.Key, res)
		case opPut:
			return fmt.Sprintf("put(%s, %q) %s", in.Key, in.Value, res)
		default:
			cond := fmt.Sprintf("%q", in.Expect)
			if in.ExpectAbsent {
				cond = "absent"
			}
			if out.Swapped {
				res = "ok"
			} else if !out.Unknown {
				res = "failed, was " + res
			}
			return fmt.Sprintf("cas(%s, %s -> %q) %s", in.Key, cond, in.Value, res)
		}
	},
	DescribeState: func(state interface{}) string {
		s := state.(regState)
		if !s.found {
			return "absent"
		}
		return fmt.Sprintf("%q", s.value)
	},
}
