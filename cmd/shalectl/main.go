// Command shalectl is Shale's command-line client: it reads and writes keys
// and reports on nodes, through the client library like any application.
//
//	shalectl put greeting hello
//	shalectl get greeting
//	shalectl scan --limit 10
//	shalectl status
//	shalectl node add 127.0.0.1:7385
//	shalectl transfer-leader 2 3
//
// Commands live one group per file; each file registers its constructors
// in init() with register (root.go), so adding a group touches no shared
// file.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "shalectl:", err)
		// A command that ran another (lock NAME -- CMD) exits with its
		// status.
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) && ec.ExitCode() > 0 {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}
