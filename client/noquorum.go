package client

import "github.com/shaledb/shale/api/kvpb"

// No quorum (docs/operations.md, "Failures").
//
// A node answers a request to a range that cannot reach a quorum of its
// voters with Unavailable + NoQuorum, naming the unreachable nodes, after
// at most about two election timeouts, and before proposing anything: the
// request was not applied. The answering node may be the one cut off, so
// the client tries the range's other voters at once; when each of them
// has answered NoQuorum or could not be reached within this request, it
// returns the node's answer as ErrUnavailable instead of retrying until
// its deadline.

// addTo adds addr to set, making it if nil.
func addTo(set map[string]bool, addr string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	set[addr] = true
	return set
}

// allVotersIn reports whether every voter of ent's range with a known
// address is in set.
func (c *Client) allVotersIn(ent *rangeEntry, set map[string]bool) bool {
	for _, rd := range ent.desc.GetReplicas() {
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
			continue
		}
		if a := c.cache.address(rd.GetNodeId()); a != "" && !set[a] {
			return false
		}
	}
	return true
}
