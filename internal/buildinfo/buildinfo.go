// Package buildinfo holds the version of this build of Shale.
package buildinfo

// Version is Shale's version. Release builds set it with
// -ldflags "-X github.com/shaledb/shale/internal/buildinfo.Version=v1.2.3".
var Version = "0.1.0-dev"
