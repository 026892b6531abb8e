package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newTestFlags is the real flag set of shale, parsed from args.
func newTestFlags(t *testing.T, args ...string) (*flag.FlagSet, *settings) {
	t.Helper()
	fs := flag.NewFlagSet("shale", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := &settings{}
	s.define(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return fs, s
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSettingsPrecedence checks flag > environment > file > default, for
// both file formats, and that the sources are reported.
func TestSettingsPrecedence(t *testing.T) {
	files := map[string]string{
		"shale.yaml": "listen: 10.0.0.1:1\nlog-level: warn\ndata-dir: /srv/from-file\nraft-tick: 250ms\n" +
			"engine-block-cache-size: 1048576\ndisable-lease-reads: true\njoin: [10.0.0.1:7379, 10.0.0.2:7379]\n",
		"shale.toml": "listen = \"10.0.0.1:1\"\nlog-level = \"warn\"\ndata-dir = \"/srv/from-file\"\nraft-tick = \"250ms\"\n" +
			"engine-block-cache-size = 1048576\ndisable-lease-reads = true\njoin = [\"10.0.0.1:7379\", \"10.0.0.2:7379\"]\n",
	}
	for name, body := range files {
		t.Run(name, func(t *testing.T) {
			cfg := writeFile(t, name, body)
			fs, s := newTestFlags(t, "--config", cfg, "--listen", "127.0.0.1:3")
			env := map[string]string{"SHALE_LISTEN": "127.0.0.1:2", "SHALE_LOG_LEVEL": "debug", "SHALE_NODE_ID": "7"}
			src, err := resolveSources(fs, envOf(env))
			if err != nil {
				t.Fatal(err)
			}
			if s.listen != "127.0.0.1:3" || src["listen"] != "flag" {
				t.Errorf("listen = %q from %q, want the flag's", s.listen, src["listen"])
			}
			if s.logLevel != "debug" || src["log-level"] != "env" {
				t.Errorf("log-level = %q from %q, want the environment's", s.logLevel, src["log-level"])
			}
			if s.nodeID != 7 {
				t.Errorf("node-id = %d, want 7 from SHALE_NODE_ID", s.nodeID)
			}
			if s.dataDir != "/srv/from-file" || src["data-dir"] != "file" {
				t.Errorf("data-dir = %q from %q, want the file's", s.dataDir, src["data-dir"])
			}
			if s.raft.TickInterval != 250*time.Millisecond || s.eng.BlockCacheSize != 1<<20 || !s.raft.DisableLeaseReads {
				t.Errorf("file values: tick %v cache %d lease-reads-off %v", s.raft.TickInterval, s.eng.BlockCacheSize, s.raft.DisableLeaseReads)
			}
			if s.join != "10.0.0.1:7379,10.0.0.2:7379" {
				t.Errorf("join from a list = %q", s.join)
			}
			if s.httpAddr != "127.0.0.1:7380" || src["http"] != "" {
				t.Errorf("http = %q from %q, want the default", s.httpAddr, src["http"])
			}
		})
	}
}

// TestSettingsConfigFromEnv: SHALE_CONFIG names the file when --config
// is not given.
func TestSettingsConfigFromEnv(t *testing.T) {
	cfg := writeFile(t, "c.yml", "data-dir: /srv/x\n")
	fs, s := newTestFlags(t)
	if _, err := resolveSources(fs, envOf(map[string]string{"SHALE_CONFIG": cfg})); err != nil {
		t.Fatal(err)
	}
	if s.dataDir != "/srv/x" || s.config != cfg {
		t.Fatalf("data-dir %q config %q", s.dataDir, s.config)
	}
}

// TestSettingsErrors: bad input is refused with an error naming where it
// came from.
func TestSettingsErrors(t *testing.T) {
	cases := []struct {
		name, file, body string
		env              map[string]string
		want             string
	}{
		{"unknown key", "c.yaml", "data_dir: x\n", nil, `unknown setting "data_dir"`},
		{"cli-only key", "c.yaml", "version: true\n", nil, `unknown setting "version"`},
		{"bad file value", "c.toml", "raft-tick = \"soon\"\n", nil, "raft-tick"},
		{"nested", "c.yaml", "engine:\n  block-cache-size: 1\n", nil, "engine: want a single value"},
		{"bad yaml", "c.yaml", "listen: [\n", nil, "config file"},
		{"extension", "c.json", "{}", nil, `unknown extension ".json"`},
		{"bad env value", "", "", map[string]string{"SHALE_NODE_ID": "three"}, "SHALE_NODE_ID"},
		{"missing file", "", "", map[string]string{"SHALE_CONFIG": "does-not-exist.yaml"}, "does-not-exist.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var args []string
			if c.file != "" {
				args = []string{"--config", writeFile(t, c.file, c.body)}
			}
			fs, _ := newTestFlags(t, args...)
			_, err := resolveSources(fs, envOf(c.env))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// TestSettingsDocumented: docs/operations.md's configuration table has a
// row for every setting, with its environment variable and default, and
// no row for a setting that does not exist.
func TestSettingsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	key := func(row string) string {
		cols := strings.Split(row, " | ")
		if len(cols) < 4 {
			return row
		}
		return strings.Join(cols[:3], " | ")
	}
	documented := make(map[string]bool)
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `--") {
			documented[key(line)] = true
		}
	}
	fs, _ := newTestFlags(t)
	want := make(map[string]bool)
	for _, row := range settingsTable(fs) {
		want[key(row)] = true
		if !documented[key(row)] {
			t.Errorf("docs/operations.md lacks (or has another env/default in) the row:\n%s", row)
		}
	}
	for k := range documented {
		if !want[k] {
			t.Errorf("docs/operations.md documents a setting shale does not have: %s", k)
		}
	}
}

// TestExampleConfigFiles: the examples under deploy/config load, and both
// formats mean the same settings.
func TestExampleConfigFiles(t *testing.T) {
	var got []map[string]string
	for _, name := range []string{"shale.yaml", "shale.toml"} {
		fs, s := newTestFlags(t, "--config", filepath.Join("..", "..", "deploy", "config", name))
		src, err := resolveSources(fs, envOf(nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if src["data-dir"] != "file" || s.dataDir != "/var/lib/shale" || s.eng.BlockCacheSize != 256<<20 ||
			s.initialCluster != "1=10.0.0.1:7379,2=10.0.0.2:7379,3=10.0.0.3:7379" || s.shutdownTimeout != 20*time.Second {
			t.Errorf("%s: data-dir %q cache %d initial %q shutdown %v", name, s.dataDir, s.eng.BlockCacheSize, s.initialCluster, s.shutdownTimeout)
		}
		values := map[string]string{}
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "config" {
				values[f.Name] = f.Value.String()
			}
		})
		got = append(got, values)
	}
	for k, v := range got[0] {
		if got[1][k] != v {
			t.Errorf("%s: shale.yaml gives %q, shale.toml %q", k, v, got[1][k])
		}
	}
}
