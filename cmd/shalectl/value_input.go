package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// maxInputValue bounds a value read from stdin or a file, so that a wrong
// file is refused before it is held in memory. Nodes refuse values over
// their own limit (4 MiB by default) with a clear error; this is only a
// guard against reading gigabytes.
const maxInputValue = 64 << 20

// stdinArg is the VALUE that means "read the value from stdin".
const stdinArg = "-"

// valueSource is where put takes its value: exactly one of the VALUE
// argument, stdin (VALUE "-") or --file.
type valueSource struct {
	file string
}

// read returns the value: the argument (decoded by --hex), or the bytes of
// stdin or --file taken as they are. Stdin is read only when VALUE is "-"
// (never guessed from whether stdin is a terminal), so a script that
// forgets the value fails instead of hanging on its input.
func (vs *valueSource) read(g *globals, cmd *cobra.Command, args []string) ([]byte, error) {
	switch {
	case vs.file != "" && len(args) > 0:
		return nil, errors.New("give the value as VALUE or --file, not both")
	case vs.file != "":
		f, err := os.Open(vs.file)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		return readBounded(f, "--file "+vs.file)
	case len(args) == 0:
		return nil, errors.New(`missing VALUE: give it as an argument, as "-" to read stdin, or with --file`)
	case args[0] == stdinArg:
		return readBounded(cmd.InOrStdin(), "stdin")
	default:
		return g.parseArg("value", args[0])
	}
}

func readBounded(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInputValue+1))
	if err != nil {
		return nil, fmt.Errorf("reading the value from %s: %w", what, err)
	}
	if len(b) > maxInputValue {
		return nil, fmt.Errorf("the value from %s is over %d bytes", what, maxInputValue)
	}
	return b, nil
}
