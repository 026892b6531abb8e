package node

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/shaledb/shale/internal/certs"
)

// minTokenLen keeps tokens long enough that guessing one is hopeless
// (shalectl certs create-token makes 32 random bytes, 43 characters).
const minTokenLen = 24

// tokenEntry is one line of a token file.
type tokenEntry struct {
	name string
	role certs.Role
}

// tokenFile holds the bearer tokens a node accepts, read from a file of
// lines
//
//	<role> <token> [<name>]
//
// (role read-only, read-write or admin; # starts a comment). It re-reads
// the file when it changes (checked at most once per second) or on Reload
// (SIGHUP); a file that fails to parse keeps the previous tokens. Tokens
// are kept by SHA-256 digest, so lookups take the same time whatever the
// token. Safe for concurrent use.
type tokenFile struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	tokens  map[[32]byte]tokenEntry
	stamp   string
	checked time.Time
}

func newTokenFile(path string, log *slog.Logger) (*tokenFile, error) {
	tf := &tokenFile{path: path, log: log}
	if err := tf.Reload(); err != nil {
		return nil, err
	}
	return tf, nil
}

// Reload re-reads the file now.
func (tf *tokenFile) Reload() error {
	stamp := tf.fileStamp()
	data, err := os.ReadFile(tf.path)
	if err != nil {
		return fmt.Errorf("node: reading the token file: %w", err)
	}
	tokens, err := parseTokens(data)
	if err != nil {
		return fmt.Errorf("node: token file %s: %w", tf.path, err)
	}
	tf.mu.Lock()
	first := tf.tokens == nil
	tf.tokens, tf.stamp, tf.checked = tokens, stamp, time.Now()
	tf.mu.Unlock()
	if !first {
		tf.log.Info("token file reloaded", "path", tf.path, "tokens", len(tokens))
	}
	return nil
}

func (tf *tokenFile) fileStamp() string {
	fi, err := os.Stat(tf.path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
}

// lookup returns the entry of token, if the file lists it.
func (tf *tokenFile) lookup(token string) (tokenEntry, bool) {
	tf.mu.Lock()
	due := time.Since(tf.checked) >= reloadCheckInterval
	if due {
		tf.checked = time.Now()
	}
	stamp := tf.stamp
	tf.mu.Unlock()
	if due && tf.fileStamp() != stamp {
		if err := tf.Reload(); err != nil {
			tf.log.Error("token file changed but cannot be loaded; keeping the previous tokens", "err", err)
			tf.mu.Lock()
			tf.stamp = tf.fileStamp()
			tf.mu.Unlock()
		}
	}
	sum := sha256.Sum256([]byte(token))
	tf.mu.Lock()
	defer tf.mu.Unlock()
	e, ok := tf.tokens[sum]
	return e, ok
}

func parseTokens(data []byte) (map[[32]byte]tokenEntry, error) {
	out := map[[32]byte]tokenEntry{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("line %d: want <role> <token> [<name>]", line)
		}
		role, err := certs.ParseRole(f[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if len(f[1]) < minTokenLen {
			return nil, fmt.Errorf("line %d: token shorter than %d characters", line, minTokenLen)
		}
		name := fmt.Sprintf("token@line%d", line)
		if len(f) == 3 {
			name = f[2]
		}
		sum := sha256.Sum256([]byte(f[1]))
		if _, dup := out[sum]; dup {
			return nil, fmt.Errorf("line %d: token listed twice", line)
		}
		out[sum] = tokenEntry{name: name, role: role}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
