package node

import "github.com/shaledb/shale/storage"

// The node's engine settings, re-exported so that cmd/shale wires engine
// flags without importing storage (cmd/ depends on node only).

// EngineOptions configures the node's storage engine; the zero value means
// the engine's defaults.
type EngineOptions = storage.Options

// EngineDefaults returns the engine's defaults, for help texts.
func EngineDefaults() EngineOptions { return storage.EngineDefaults() }

// EngineVersion returns the engine's version string.
func EngineVersion() string { return storage.EngineVersion() }

// ParseCompression parses an engine compression name ("none", "snappy").
func ParseCompression(s string) (storage.Compression, error) { return storage.ParseCompression(s) }
