package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/shaledb/shale/client"
	"github.com/spf13/cobra"
)

func init() { register(newTxnCmd) }

func newTxnCmd(g *globals) *cobra.Command {
	var file string
	var interactive bool
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Compare keys, then apply one set of operations or another, atomically",
		Long: `txn reads a conditional transaction from stdin (or --file) and runs it
atomically (client.CondTxn): if every comparison holds at one snapshot,
the success operations run, otherwise the failure operations; nothing
else can change a compared key in between. Three sections, separated by
an empty line, as in etcdctl txn:

  value(KEY) = VALUE        comparisons, one a line; the operator is one
  version(KEY) > TS         of = != < >; version TS as --at takes it,
                            0 for a missing key (so version(k) = 0 holds
                            when k does not exist)

  put KEY VALUE             success operations, one a line
  del KEY [END]             (del with END deletes [KEY, END))
  get KEY

  put KEY VALUE             failure operations
  ...

A KEY or VALUE is a word without spaces or a Go-quoted string ("a b",
"\x00"); with --hex, hex. Lines starting with # are comments. -i prints
a prompt before each section (for typing at a terminal).

It prints SUCCESS or FAILURE, then each get's value (or "(not found)")
on a line of its own; --json prints {"succeeded":..., "gets":[...]}.
The compared and written keys may lie in any ranges (a transaction
across ranges cannot delete a span yet).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			var prompt io.Writer
			if interactive {
				prompt = cmd.ErrOrStderr()
			}
			spec, err := parseTxnSpec(g, in, prompt)
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			res, err := c.CondTxn(ctx, spec.cmps, spec.then, spec.els)
			if err != nil {
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			if g.json {
				gets := make([]object, 0, len(res.Gets))
				for _, r := range res.Gets {
					o := object{{"found", r.Found}}
					if r.Found {
						g.addBytes(&o, "value", r.Value)
					}
					gets = append(gets, o)
				}
				return writeJSON(out, object{{"succeeded", res.Succeeded}, {"gets", gets}})
			}
			if res.Succeeded {
				fmt.Fprintln(out, "SUCCESS")
			} else {
				fmt.Fprintln(out, "FAILURE")
			}
			for _, r := range res.Gets {
				if r.Found {
					fmt.Fprintln(out, g.display(r.Value))
				} else {
					fmt.Fprintln(out, "(not found)")
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "read the transaction from this file instead of stdin")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "prompt for each section on stderr")
	return cmd
}

type txnSpec struct {
	cmps      []client.Compare
	then, els []client.TxnOp
}

// parseTxnSpec reads the three sections of txn's input.
func parseTxnSpec(g *globals, in io.Reader, prompt io.Writer) (txnSpec, error) {
	var spec txnSpec
	prompts := []string{"compares:", "success requests (get, put, del):", "failure requests (get, put, del):"}
	section := 0
	if prompt != nil {
		fmt.Fprintln(prompt, prompts[0])
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if line == "" {
			section++
			if section > 2 {
				break
			}
			if prompt != nil {
				fmt.Fprintln(prompt, prompts[section])
			}
			continue
		}
		var err error
		switch section {
		case 0:
			var cm client.Compare
			if cm, err = parseCompare(g, line); err == nil {
				spec.cmps = append(spec.cmps, cm)
			}
		default:
			var op client.TxnOp
			if op, err = parseTxnOp(g, line); err == nil {
				if section == 1 {
					spec.then = append(spec.then, op)
				} else {
					spec.els = append(spec.els, op)
				}
			}
		}
		if err != nil {
			return txnSpec{}, fmt.Errorf("line %d: %q: %w", lineNo, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return txnSpec{}, fmt.Errorf("reading the transaction: %w", err)
	}
	if len(spec.cmps) == 0 && len(spec.then) == 0 && len(spec.els) == 0 {
		return txnSpec{}, fmt.Errorf("the transaction is empty: give comparisons, then an empty line and the success operations, then an empty line and the failure operations (see shalectl txn --help)")
	}
	return spec, nil
}

// parseCompare reads `value(KEY) OP VALUE` or `version(KEY) OP TS`.
func parseCompare(g *globals, line string) (client.Compare, error) {
	var byVersion bool
	var rest string
	switch {
	case strings.HasPrefix(line, "value("):
		rest = line[len("value("):]
	case strings.HasPrefix(line, "version("):
		byVersion, rest = true, line[len("version("):]
	default:
		return client.Compare{}, fmt.Errorf("a comparison starts with value( or version(")
	}
	keyTok, rest, err := nextToken(rest)
	if err != nil {
		return client.Compare{}, err
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, ")") {
		return client.Compare{}, fmt.Errorf("want ) after the key")
	}
	rest = strings.TrimSpace(rest[1:])
	var op client.CmpOp
	switch {
	case strings.HasPrefix(rest, "!="):
		op, rest = client.CmpNotEqual, rest[2:]
	case strings.HasPrefix(rest, "="):
		op, rest = client.CmpEqual, rest[1:]
	case strings.HasPrefix(rest, "<"):
		op, rest = client.CmpLess, rest[1:]
	case strings.HasPrefix(rest, ">"):
		op, rest = client.CmpGreater, rest[1:]
	default:
		return client.Compare{}, fmt.Errorf("want one of = != < > after the key")
	}
	target, rest, err := nextToken(rest)
	if err != nil {
		return client.Compare{}, err
	}
	if strings.TrimSpace(rest) != "" {
		return client.Compare{}, fmt.Errorf("unexpected %q after the comparison", strings.TrimSpace(rest))
	}
	key, err := g.parseArg("key", keyTok)
	if err != nil {
		return client.Compare{}, err
	}
	if byVersion {
		var ts client.Timestamp
		if target != "0" {
			if ts, err = client.ParseTimestamp(target); err != nil {
				return client.Compare{}, fmt.Errorf("version: %w", err)
			}
		}
		return client.CompareVersion(key, op, ts), nil
	}
	value, err := g.parseArg("value", target)
	if err != nil {
		return client.Compare{}, err
	}
	return client.CompareValue(key, op, value), nil
}

// parseTxnOp reads `get KEY`, `put KEY VALUE` or `del KEY [END]`.
func parseTxnOp(g *globals, line string) (client.TxnOp, error) {
	verb, rest, _ := strings.Cut(line, " ")
	var toks []string
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		tok, r, err := nextToken(rest)
		if err != nil {
			return client.TxnOp{}, err
		}
		toks, rest = append(toks, tok), r
	}
	args := make([][]byte, len(toks))
	for i, tok := range toks {
		name := "key"
		if i > 0 {
			name = map[string]string{"put": "value", "del": "end"}[verb]
		}
		b, err := g.parseArg(name, tok)
		if err != nil {
			return client.TxnOp{}, err
		}
		args[i] = b
	}
	switch {
	case verb == "get" && len(args) == 1:
		return client.OpGet(args[0]), nil
	case verb == "put" && len(args) == 2:
		return client.OpPut(args[0], args[1]), nil
	case verb == "del" && len(args) == 1:
		return client.OpDelete(args[0]), nil
	case verb == "del" && len(args) == 2:
		return client.OpDeleteRange(args[0], args[1]), nil
	}
	return client.TxnOp{}, fmt.Errorf("want get KEY, put KEY VALUE or del KEY [END]")
}

// nextToken reads a Go-quoted string or a word (up to a space or ")"),
// after leading spaces.
func nextToken(s string) (tok, rest string, err error) {
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return "", "", fmt.Errorf("missing a key or value")
	}
	if s[0] == '"' {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", "", fmt.Errorf("bad quoted string: %w", err)
		}
		u, err := strconv.Unquote(q)
		if err != nil {
			return "", "", err
		}
		return u, s[len(q):], nil
	}
	end := strings.IndexAny(s, " \t)")
	if end < 0 {
		end = len(s)
	}
	return s[:end], s[end:], nil
}
