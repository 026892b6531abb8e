// Command etcd is etcd's own server, built from the Go module proxy at the
// version this module's go.mod pins, so that scripts/bench-vs-etcd can run
// a current etcd beside Debian's older etcd-server package and Shale.
//
// It is its own module so that the project's go.mod does not depend on
// etcd's server; scripts/build-etcd37 builds it into build/etcd37/etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
