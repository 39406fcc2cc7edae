package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// The suite's network: the bridge, the namespace prefix and the subnet exist
// only on this machine while a run lasts. One run at a time.
const (
	bridgeName = "strchaos0"
	nsPrefix   = "strchaos-"
	subnet     = "10.99" // /16; the bridge is 10.99.0.1, processes from 10.99.0.2
	bridgeIP   = "10.99.0.1"
)

// Netns puts each process in its own network namespace, joined to one bridge
// by a veth pair, and partitions them with iptables DROP rules inside the
// namespaces. The test process reaches every namespace through the bridge.
type Netns struct {
	mu     sync.Mutex
	byName map[string]*nsProc
	order  []*nsProc
	cut    map[string]bool // namespaces that hold DROP rules
}

type nsProc struct {
	name, ns, ip string
}

// RequireRoot returns a clear error when the process cannot create network
// namespaces (not root, or no CAP_NET_ADMIN).
func RequireRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the chaos suite needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces; run it as root (euid is %d)", os.Geteuid())
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the chaos suite needs %q (iproute2, iptables) on PATH: %v", tool, err)
		}
	}
	probe := nsPrefix + "probe"
	_ = run("ip", "netns", "del", probe)
	if err := run("ip", "netns", "add", probe); err != nil {
		return fmt.Errorf("cannot create a network namespace (needs CAP_SYS_ADMIN and CAP_NET_ADMIN): %w", err)
	}
	return run("ip", "netns", "del", probe)
}

// NewNetns creates the bridge (removing what a crashed earlier run left).
func NewNetns() (*Netns, error) {
	if busy := cleanupLeftovers(); len(busy) > 0 {
		return nil, fmt.Errorf("network namespaces %v of an earlier chaos run still hold processes (another run, or one killed by a timeout): list them with `ip netns pids NAME` and stop them first", busy)
	}
	n := &Netns{byName: map[string]*nsProc{}, cut: map[string]bool{}}
	steps := [][]string{
		{"ip", "link", "add", bridgeName, "type", "bridge"},
		{"ip", "addr", "add", bridgeIP + "/16", "dev", bridgeName},
		{"ip", "link", "set", bridgeName, "up"},
		// With br_netfilter loaded, bridged frames cross the host's FORWARD
		// chain (Docker's policy there is DROP): let this bridge's through.
		{"iptables", "-I", "FORWARD", "-i", bridgeName, "-o", bridgeName, "-j", "ACCEPT"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// cleanupLeftovers removes the namespaces, bridge and FORWARD rule of an
// earlier run that did not reach Close. A namespace that still holds a
// process is left alone and returned, and then nothing else is touched.
func cleanupLeftovers() (busy []string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		if pids, _ := exec.Command("ip", "netns", "pids", f[0]).Output(); len(strings.TrimSpace(string(pids))) == 0 {
			_ = run("ip", "netns", "del", f[0])
		} else {
			busy = append(busy, f[0])
		}
	}
	if len(busy) > 0 {
		return busy
	}
	if exec.Command("ip", "link", "show", bridgeName).Run() == nil {
		_ = run("ip", "link", "del", bridgeName)
	}
	for run("iptables", "-D", "FORWARD", "-i", bridgeName, "-o", bridgeName, "-j", "ACCEPT") == nil {
	}
	return nil
}

// Attach creates the named process's namespace and address (e2e.Network).
func (n *Netns) Attach(name string) (string, []string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.byName[name]; ok {
		return p.ip, wrap(p.ns), nil
	}
	i := len(n.order) + 2
	if i > 250*250 {
		return "", nil, errors.New("netns: out of addresses")
	}
	p := &nsProc{name: name, ns: fmt.Sprintf("%s%d", nsPrefix, i), ip: fmt.Sprintf("%s.%d.%d", subnet, i/250, i%250)}
	host, peer := fmt.Sprintf("sch%dh", i), fmt.Sprintf("sch%dn", i) // ≤ 15 bytes
	steps := [][]string{
		{"ip", "netns", "add", p.ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", p.ns},
		{"ip", "link", "set", host, "master", bridgeName, "up"},
		{"ip", "-n", p.ns, "addr", "add", p.ip + "/16", "dev", peer},
		{"ip", "-n", p.ns, "link", "set", peer, "up"},
		{"ip", "-n", p.ns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return "", nil, err
		}
	}
	n.byName[name] = p
	n.order = append(n.order, p)
	return p.ip, wrap(p.ns), nil
}

func wrap(ns string) []string { return []string{"ip", "netns", "exec", ns} }

// IP returns the named process's address.
func (n *Netns) IP(name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.byName[name]; ok {
		return p.ip
	}
	return ""
}

// Cut black-holes every packet between the processes in a and those in b (in
// both directions; rules in a's namespaces). Established connections go
// silent, as on a real partition: no reset is sent.
func (n *Netns) Cut(a, b []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range a {
		px, ok := n.byName[x]
		if !ok {
			return fmt.Errorf("netns: unknown process %q", x)
		}
		var rules []string
		for _, y := range b {
			py, ok := n.byName[y]
			if !ok {
				return fmt.Errorf("netns: unknown process %q", y)
			}
			rules = append(rules, "-A INPUT -s "+py.ip+" -j DROP", "-A OUTPUT -d "+py.ip+" -j DROP")
		}
		if err := restore(px.ns, rules); err != nil {
			return err
		}
		n.cut[px.ns] = true
	}
	return nil
}

// restore appends rules to the filter table of ns in one iptables-restore.
func restore(ns string, rules []string) error {
	in := "*filter\n" + strings.Join(rules, "\n") + "\nCOMMIT\n"
	cmd := exec.Command("ip", "netns", "exec", ns, "iptables-restore", "--noflush")
	cmd.Stdin = strings.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore in %s: %v: %s", ns, err, out)
	}
	return nil
}

// Heal removes every DROP rule.
func (n *Netns) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for ns := range n.cut {
		if err := run("ip", "netns", "exec", ns, "iptables", "-F"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(n.cut, ns)
	}
	return errors.Join(errs...)
}

// Close deletes the namespaces (and so their veths), the bridge and its
// FORWARD rule. The processes must be stopped first.
func (n *Netns) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.order {
		_ = run("ip", "netns", "del", p.ns)
	}
	n.order, n.byName = nil, map[string]*nsProc{}
	_ = run("ip", "link", "del", bridgeName)
	for run("iptables", "-D", "FORWARD", "-i", bridgeName, "-o", bridgeName, "-j", "ACCEPT") == nil {
	}
}

func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
