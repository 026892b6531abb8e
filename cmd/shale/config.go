package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	yaml "go.yaml.in/yaml/v3"
)

// Every flag is also an environment variable and a config-file key, with
// the precedence flag > environment > config file > default. The names are
// derived, so a new flag needs nothing here:
//
//	--engine-block-cache-size   SHALE_ENGINE_BLOCK_CACHE_SIZE   engine-block-cache-size: 67108864

// commandLineOnly flags are not read from the environment or a file.
// (--config is read from SHALE_CONFIG by resolveSources itself.)
var commandLineOnly = map[string]bool{"config": true, "version": true}

// envName is the environment variable of a flag.
func envName(flagName string) string {
	return "SHALE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// resolveSources gives every flag not set on the command line its value
// from the environment or, failing that, the config file (--config or
// SHALE_CONFIG). It returns where each setting came from, for the startup
// log. A bad value or an unknown file key is an error naming its source.
func resolveSources(fs *flag.FlagSet, getenv func(string) string) (map[string]string, error) {
	source := make(map[string]string)
	fs.Visit(func(f *flag.Flag) { source[f.Name] = "flag" })

	cfgPath := fs.Lookup("config").Value.String()
	if source["config"] == "" {
		if p := getenv(envName("config")); p != "" {
			cfgPath = p
			if err := fs.Set("config", p); err != nil {
				return nil, err
			}
			source["config"] = "env"
		}
	}
	var file map[string]string
	if cfgPath != "" {
		var err error
		if file, err = loadConfigFile(cfgPath); err != nil {
			return nil, err
		}
		for key := range file {
			if fs.Lookup(key) == nil || commandLineOnly[key] {
				return nil, fmt.Errorf("config file %s: unknown setting %q (keys are flag names without the dashes, e.g. data-dir)", cfgPath, key)
			}
		}
	}

	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || source[f.Name] != "" || commandLineOnly[f.Name] {
			return
		}
		if v, ok := lookupEnv(getenv, envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
				return
			}
			source[f.Name] = "env"
			return
		}
		if v, ok := file[f.Name]; ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("config file %s: %s: %q: %w", cfgPath, f.Name, v, e)
				return
			}
			source[f.Name] = "file"
		}
	})
	if err != nil {
		return nil, err
	}
	return source, nil
}

// lookupEnv treats an empty variable as unset, as shells make it easy to
// export one by accident.
func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

// loadConfigFile reads a flat YAML or TOML file (by extension) of
// setting: value pairs. Lists become comma-separated values (so
// initial-cluster or join may be written either way).
func loadConfigFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	raw := make(map[string]any)
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".yaml", ".yml":
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	case ".toml":
		if err := toml.Unmarshal(data, &raw); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("config file %s: unknown extension %q (want .yaml, .yml or .toml)", path, ext)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, err := scalarString(v)
		if err != nil {
			return nil, fmt.Errorf("config file %s: %s: %w", path, k, err)
		}
		out[k] = s
	}
	return out, nil
}

// scalarString renders a decoded value the way its flag parses it.
func scalarString(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, err := scalarString(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("want a single value or a list, not %T", v)
}

// settingsTable renders the docs/operations.md configuration table rows
// for fs, in name order: what TestSettingsDocumented compares against
// (the first three columns; the description may say more than the flag's
// usage line).
func settingsTable(fs *flag.FlagSet) []string {
	var rows []string
	fs.VisitAll(func(f *flag.Flag) {
		env := "`" + envName(f.Name) + "`"
		if commandLineOnly[f.Name] && f.Name != "config" {
			env = "-"
		}
		def := "`" + f.DefValue + "`"
		if f.DefValue == "" {
			def = "(empty)"
		}
		rows = append(rows, fmt.Sprintf("| `--%s` | %s | %s | %s |", f.Name, env, def, f.Usage))
	})
	return rows
}

// logSettings logs, once at startup, every setting that is not at its
// default and where it came from. Values of settings named like secrets
// (token, password, secret) are not logged.
func logSettings(logger *slog.Logger, fs *flag.FlagSet, sources map[string]string) {
	var attrs []any
	fs.VisitAll(func(f *flag.Flag) {
		if src := sources[f.Name]; src != "" {
			v := f.Value.String()
			if secretName(f.Name) {
				v = "(redacted)"
			}
			attrs = append(attrs, slog.Group(f.Name, "value", v, "from", src))
		}
	})
	logger.Info("settings", attrs...)
}

func secretName(name string) bool {
	for _, w := range []string{"token", "password", "secret"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
