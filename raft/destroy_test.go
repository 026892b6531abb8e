package raft

import (
	"fmt"
	"testing"

	"github.com/shaledb/shale/raft/keys"
)

// TestCarveSpans: a removed replica deletes only what no other replica of
// its store owns.
func TestCarveSpans(t *testing.T) {
	sp := func(a, b string) keys.Span { return keys.Span{Start: []byte(a), End: []byte(b)} }
	cases := []struct {
		owned []keys.Span
		want  string
	}{
		{nil, "[a,z)"},
		{[]keys.Span{sp("m", "z")}, "[a,m)"},
		{[]keys.Span{sp("0", "c")}, "[c,z)"},
		{[]keys.Span{sp("p", "q"), sp("c", "f")}, "[a,c)[f,p)[q,z)"},
		{[]keys.Span{sp("c", "h"), sp("e", "k")}, "[a,c)[k,z)"},
		{[]keys.Span{sp("0", "zz")}, ""},
	}
	for _, c := range cases {
		got := ""
		for _, s := range carveSpans(sp("a", "z"), c.owned) {
			got += fmt.Sprintf("[%s,%s)", s.Start, s.End)
		}
		if got != c.want {
			t.Errorf("carving %v out of [a,z) = %s; want %s", c.owned, got, c.want)
		}
	}
}

// TestPeerAddressesSurviveRestart: a store restarted without its start-up
// peer list still knows every address it had learned, from the address
// book in its engine.
func TestPeerAddressesSurviveRestart(t *testing.T) {
	noPeers := false
	c := newTestCluster(t, 3, func(cfg *Config) {
		if noPeers {
			cfg.Peers = nil
		}
	})
	want := c.peerAddrs()
	c.storeOf(3).SetPeerAddress(9, "127.0.0.9:1") // learned later, e.g. from meta
	want[9] = "127.0.0.9:1"
	c.stop(3)
	noPeers = true
	c.start(3)
	got := c.storeOf(3).PeerAddresses()
	for id, a := range want {
		if got[id] != a {
			t.Fatalf("after a restart without peers, node %d's address is %q; want %q (book %v)", id, got[id], a, got)
		}
	}
}
