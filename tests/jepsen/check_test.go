package jepsen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shaledb/shale/client"
)

// checkTimeout bounds porcupine on one key's history. A check that times
// out counts as a failure: an unchecked history proves nothing.
const checkTimeout = 60 * time.Second

// regCheck is the verdict on the register workload.
type regCheck struct {
	histories  int      // per-key histories checked
	violations []string // keys whose history is not linearizable
	timeouts   []string // keys whose check timed out
	artifacts  []string // files written for the failures
}

// toPorcupine converts the recorded operations: failed operations are
// dropped (they took no effect), as are reads whose outcome is unknown
// (they have none); an indeterminate write gets a return time after every
// other operation's, so that it may be linearized at any point after its
// call, or never take visible effect.
func toPorcupine(ops []op) []porcupine.Operation {
	var end int64
	for _, o := range ops {
		end = max(end, o.Return)
	}
	// Porcupine draws one row per ClientId, numbered densely from zero: one
	// per (worker, process), so that a pending operation never shares its
	// row with the worker's later ones.
	type proc struct{ worker, process int }
	clients := map[proc]int{}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		switch {
		case o.outcome == failOutcome:
			continue
		case o.outcome == unknownOutcome && o.Input.Kind == opGet:
			continue
		}
		ret := o.Return
		outp := o.Output
		if o.outcome == unknownOutcome {
			ret = end + 1
			outp = regOutput{Unknown: true}
		}
		p := proc{o.Worker, o.Process}
		id, ok := clients[p]
		if !ok {
			id = len(clients)
			clients[p] = id
		}
		out = append(out, porcupine.Operation{ClientId: id, Input: o.Input, Call: o.Call, Output: outp, Return: ret})
	}
	return out
}

// checkRegister checks every key's history with porcupine. On a violation
// or a timeout it writes the key's history (JSON) and porcupine's HTML
// visualization into dir (created when first needed).
func checkRegister(ops []op, dir string) (regCheck, error) {
	byKey := map[string][]op{}
	for _, o := range ops {
		byKey[o.Input.Key] = append(byKey[o.Input.Key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var res regCheck
	for _, k := range keys {
		hist := toPorcupine(byKey[k])
		if len(hist) == 0 {
			continue
		}
		res.histories++
		verdict, info := porcupine.CheckOperationsVerbose(registerModel, hist, checkTimeout)
		switch verdict {
		case porcupine.Ok:
			continue
		case porcupine.Illegal:
			res.violations = append(res.violations, k)
		default:
			res.timeouts = append(res.timeouts, k)
		}
		files, err := writeArtifacts(dir, k, byKey[k], info)
		res.artifacts = append(res.artifacts, files...)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// writeArtifacts writes key's raw history and porcupine's visualization.
func writeArtifacts(dir, key string, ops []op, info porcupine.LinearizationInfo) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the artifacts folder: %w", err)
	}
	base := filepath.Join(dir, "key-"+safeName(key))
	b, err := json.MarshalIndent(ops, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding the history of %s: %w", key, err)
	}
	if err := os.WriteFile(base+".json", b, 0o644); err != nil {
		return nil, fmt.Errorf("writing the history of %s: %w", key, err)
	}
	if err := porcupine.VisualizePath(registerModel, info, base+".html"); err != nil {
		return []string{base + ".json"}, fmt.Errorf("writing the visualization of %s: %w", key, err)
	}
	return []string{base + ".json", base + ".html"}, nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r < ' ' || r > '~' {
			return '_'
		}
		return r
	}, s)
}

// setCheck is the verdict on the set workload.
type setCheck struct {
	acked      int      // acknowledged adds
	lost       []string // acknowledged adds missing from the final read
	unexpected []string // elements read that were never added (or with a wrong value)
	recovered  int      // indeterminate adds found present
}

// checkSet compares the final read with what was added: every
// acknowledged add must be present with its value, and nothing that was
// not attempted may appear. attempted maps each key to its value and
// outcome.
func checkSet(attempted map[string]setAdd, read map[string]string) setCheck {
	var res setCheck
	for k, a := range attempted {
		v, found := read[k]
		switch {
		case a.outcome == okOutcome:
			res.acked++
			if !found || v != a.value {
				res.lost = append(res.lost, k)
			}
		case found && a.outcome == unknownOutcome:
			res.recovered++
		}
		if found && a.outcome == failOutcome {
			res.unexpected = append(res.unexpected, k+" (its add failed definitely)")
		}
		if found && v != a.value {
			res.unexpected = append(res.unexpected, fmt.Sprintf("%s=%q (added %q)", k, v, a.value))
		}
	}
	for k := range read {
		if _, ok := attempted[k]; !ok {
			res.unexpected = append(res.unexpected, k+" (never added)")
		}
	}
	sort.Strings(res.lost)
	sort.Strings(res.unexpected)
	return res
}

type setAdd struct {
	value   string
	outcome outcome
	// version is the add's version when it was acknowledged (the backup
	// check compares it with the backup's timestamp).
	version client.Timestamp
}
