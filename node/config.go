package node

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/shaledb/shale/storage"
)

// Config configures a Node. NodeID and DataDir are required; every other
// field has a documented default.
type Config struct {
	// NodeID identifies the node in the cluster; > 0. The data directory
	// remembers it: a node refuses to start on another node's directory.
	NodeID uint64
	// DataDir holds everything the node stores; the engine lives in
	// DataDir/engine.
	DataDir string
	// AdvertiseAddr and AdvertiseHTTPAddr are the addresses other nodes and
	// clients reach this node's gRPC and HTTP servers at. Empty means the
	// addresses of the listeners given to Serve.
	AdvertiseAddr     string
	AdvertiseHTTPAddr string
	// Engine configures the storage engine (zero: the engine's defaults).
	Engine storage.Options
	// Limits bound requests (zero: DefaultLimits).
	Limits Limits
	// Logger receives the node's logs (nil: slog.Default()).
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.NodeID == 0 {
		return errors.New("node: Config.NodeID must be > 0")
	}
	if c.DataDir == "" {
		return errors.New("node: Config.DataDir is required")
	}
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits()
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("node: Config.Limits: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
