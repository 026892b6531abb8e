package node

import (
	"context"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/buildinfo"
	"github.com/shaledb/shale/internal/keys"
	"github.com/shaledb/shale/storage"
)

// adminServer implements kvpb.AdminServer. A single node answers Status;
// the cluster operations (ranges, nodes, splits, moves) come with
// replication and answer Unimplemented until then.
type adminServer struct {
	kvpb.UnimplementedAdminServer
	n *Node
}

func (s *adminServer) Status(ctx context.Context, _ *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	n := s.n
	st, err := n.db.Stats()
	if err != nil {
		return nil, readError("Status", err)
	}
	self := n.descriptor()
	rs := &kvpb.RangeStatus{
		Descriptor_: &kvpb.RangeDescriptor{
			RangeId:       firstRangeID,
			Generation:    1,
			Replicas:      []*kvpb.ReplicaDescriptor{{NodeId: n.cfg.NodeID, ReplicaId: 1, Type: kvpb.ReplicaType_REPLICA_TYPE_VOTER}},
			NextReplicaId: 2,
		},
		LeaderNodeId: n.cfg.NodeID,
	}
	// Sizes are estimates from the engine's files; a memtable-only engine
	// reports none.
	if b, k, err := n.db.ApproximateSize(keys.UserSpanStart, keys.UserSpanEnd); err == nil {
		rs.ApproximateBytes, rs.ApproximateKeys = b, k
	}
	return &kvpb.StatusResponse{
		Node:             self,
		ClusterId:        n.ident.ClusterID,
		Version:          buildinfo.Version + " (" + storage.EngineVersion() + ")",
		StartedUnixNanos: n.started.UnixNano(),
		Ranges:           []*kvpb.RangeStatus{rs},
		Engine:           engineStats(&st),
		Members:          []*kvpb.NodeDescriptor{self},
	}, nil
}

func engineStats(st *storage.Stats) *kvpb.EngineStats {
	return &kvpb.EngineStats{
		UserBytesWritten:       st.UserBytesWritten,
		WalBytesWritten:        st.WALBytesWritten,
		FlushBytesWritten:      st.FlushBytesWritten,
		CompactionBytesWritten: st.CompactionBytesWritten,
		CompactionBytesRead:    st.CompactionBytesRead,
		BytesRead:              st.BytesRead,
		StallMicros:            st.StallMicros,
		BlockCacheHits:         st.BlockCacheHits,
		BlockCacheMisses:       st.BlockCacheMisses,
		BloomFilterUseful:      st.BloomFilterUseful,
		MemtableBytes:          st.MemtableBytes,
		LevelFiles:             st.LevelFiles,
		LevelBytes:             st.LevelBytes,
		WriteAmplification:     st.WriteAmplification(),
	}
}
