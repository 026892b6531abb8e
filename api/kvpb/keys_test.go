package kvpb

import "testing"

func TestKeyBefore(t *testing.T) {
	for k, want := range map[string]string{"b": "a\xff", "b\x00": "b", "": "", "a\xff": "a\xfe\xff"} {
		if got := string(KeyBefore([]byte(k))); got != want {
			t.Fatalf("KeyBefore(%q) = %q; want %q", k, got, want)
		}
	}
}

func TestMutationKey(t *testing.T) {
	for _, c := range []struct {
		m    *Mutation
		want string
	}{
		{&Mutation{Op: &Mutation_Put{Put: &PutOp{Key: []byte("p")}}}, "p"},
		{&Mutation{Op: &Mutation_Delete{Delete: &DeleteOp{Key: []byte("d")}}}, "d"},
		{&Mutation{Op: &Mutation_DeleteRange{DeleteRange: &DeleteRangeOp{StartKey: []byte("s"), EndKey: []byte("t")}}}, "s"},
		{&Mutation{}, ""},
	} {
		if got := string(MutationKey(c.m)); got != c.want {
			t.Fatalf("MutationKey(%v) = %q; want %q", c.m, got, c.want)
		}
	}
}
