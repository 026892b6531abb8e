package jepsen

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// netFaults cuts links between node addresses with iptables. All rules live
// in one chain of this test process (SHJ-<pid>), jumped to from INPUT, so
// healing is one flush and cleanup cannot touch anyone else's rules.
// Loopback packets traverse INPUT once, on delivery, so a rule with
// -s A -d B drops exactly the packets A sends to B.
type netFaults struct {
	chain string
	mu    sync.Mutex
	cut   int // rules in the chain
}

// netAvailable says why iptables cannot be used, or "".
func netAvailable() string {
	if os.Geteuid() != 0 {
		return "cutting links with iptables needs root"
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return "iptables is not installed (scripts/deps --chaos installs it)"
	}
	return ""
}

func newNetFaults() (*netFaults, error) {
	n := &netFaults{chain: fmt.Sprintf("SHJ-%d", os.Getpid())}
	if err := iptables("-N", n.chain); err != nil {
		return nil, err
	}
	if err := iptables("-I", "INPUT", "-j", n.chain); err != nil {
		_ = iptables("-X", n.chain) // best effort: the chain is empty
		return nil, err
	}
	return n, nil
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// drop drops every packet from ip src to ip dst (one direction).
func (n *netFaults) drop(src, dst string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := iptables("-A", n.chain, "-s", src, "-d", dst, "-j", "DROP"); err != nil {
		return err
	}
	n.cut++
	return nil
}

// cutBoth drops packets both ways between every node of a and every node
// of b.
func (n *netFaults) cutBoth(a, b []*node) error {
	for _, x := range a {
		for _, y := range b {
			if err := n.drop(x.ip, y.ip); err != nil {
				return err
			}
			if err := n.drop(y.ip, x.ip); err != nil {
				return err
			}
		}
	}
	return nil
}

// heal removes every rule.
func (n *netFaults) heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut == 0 {
		return nil
	}
	if err := iptables("-F", n.chain); err != nil {
		return err
	}
	n.cut = 0
	return nil
}

// close removes the chain and its jump.
func (n *netFaults) close() error {
	if err := n.heal(); err != nil {
		return err
	}
	if err := iptables("-D", "INPUT", "-j", n.chain); err != nil {
		return err
	}
	return iptables("-X", n.chain)
}
