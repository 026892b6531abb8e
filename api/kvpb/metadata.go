package kvpb

// ClusterIDMetadata is the gRPC metadata key under which a caller names the
// cluster it means to talk to. Nodes send it on every node-to-node call,
// and clients when told their cluster's ID (client.Options.ClusterID); a
// node of another cluster refuses the call with FailedPrecondition and does
// nothing. A call without it is not checked.
const ClusterIDMetadata = "shale-cluster-id"
