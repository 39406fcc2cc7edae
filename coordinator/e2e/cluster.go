package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// BuildStrata builds the strata binary into dir and returns its path.
func BuildStrata(dir string) (string, error) {
	bin := filepath.Join(dir, "strata")
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/strata")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// FreePorts returns n TCP ports on 127.0.0.1 that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// Proc is one daemon process.
type Proc struct {
	Name    string
	Args    []string
	Config  string
	Log     string
	DataDir string
	GRPC    string // tier replicas: their gRPC address
	// RaftAdmin is a tier replica's listen.admin (Spec.RaftAdmin), else "".
	RaftAdmin string
	// OperatorTLS is the directory of the cluster's operator certificate
	// (ca.pem, cert.pem, key.pem): what Admin dials with and what the
	// client commands take as --tls.
	OperatorTLS string
	// Token is the ACL token Admin sends to this tier replica (Spec.ACL),
	// else "".
	Token string
	// IP is the address the process listens on and dials from (127.0.0.1
	// unless the cluster runs on a Network).
	IP string
	// Wrap prefixes the command line (e.g. ip netns exec NS): the wrapper must
	// exec the binary so that the process id is the daemon's.
	Wrap []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	paused bool // SIGSTOPped by Pause, not yet resumed
}

// Start starts (or restarts) the process.
func (p *Proc) Start(bin string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	argv := append(append(append([]string(nil), p.Wrap...), bin), append(p.Args, "--config", p.Config)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	p.cmd = cmd
	go func() { _ = cmd.Wait(); f.Close() }()
	return nil
}

// Kill sends SIGKILL to the process (kill -9) and waits for it to die.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL) }

// Stop sends SIGTERM and waits up to 10s for a graceful exit, then SIGKILL.
func (p *Proc) Stop() { p.signal(syscall.SIGTERM) }

func (p *Proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process handles SIGTERM only once resumed
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
}

// Pid returns the process's pid (0 when it is not started).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Pause stops the process with SIGSTOP (as `docker pause` freezes a
// container): its sockets stay open, it answers nothing. Resume continues it.
func (p *Proc) Pause() error { return p.sendSignal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *Proc) Resume() error { return p.sendSignal(syscall.SIGCONT) }

// Paused reports whether the process is paused (Pause, not yet Resume).
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *Proc) sendSignal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return nil
}

// Running reports whether the process is started and alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && p.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// Timing is the control timing every tier of a test cluster uses.
type Timing struct {
	Interval, LeaseTTL, Grace, ReportInterval time.Duration
}

// Cluster is a multi-process hierarchy: a global tier, regions (each a Raft
// group of Replicas) and hosts.
type Cluster struct {
	Dir string
	Bin string
	// OperatorTLS is the directory of an operator certificate of the
	// cluster's CA: the client commands' --tls. Every connection of the
	// cluster runs over mutual TLS (docs/security.md).
	OperatorTLS string
	// Token is the bootstrap token's secret with Spec.ACL (for the client
	// commands: STRATA_TOKEN), else "".
	Token      string
	aclSection string
	ca         *tlsutil.CA
	Global     []*Proc
	Regions    map[string][]*Proc
	Racks      map[string][]*Proc // rack → its replicas (custom rack tier only)
	Hosts      map[string]*Proc   // host → process
	HostRegion map[string]string
}

// Spec shapes a cluster.
type Spec struct {
	Replicas       int
	Regions        int
	HostsPerRegion int
	HostCPU        float64
	Timing         Timing
	// RacksPerRegion, when > 0, inserts a custom "rack" tier between region and
	// host (chain global → region → rack → host): each rack is a Raft group of
	// RackReplicas replicas with HostsPerRegion hosts; regions then plan with
	// RegionPolicy (e.g. "spread").
	RacksPerRegion int
	RackReplicas   int
	RegionPolicy   string
	// HostDriver is the driver section of a host's config, in YAML flow
	// style ("{kind: exec, …}"); nil is {kind: synthetic}.
	HostDriver func(host string) string
	// TierExtra, when set, is appended to the config of every replica of tier
	// instance instance (acl, children keys).
	TierExtra func(tier, instance string) string
	// RaftAdmin gives every tier replica a listen.admin address.
	RaftAdmin bool
	// ACL turns ACL tokens on at every tier replica (acl.enabled, /healthz
	// and /readyz anonymous) with one bootstrap token file shared by all,
	// Cluster.Token; Admin sends it. A TierExtra with its own acl section
	// wins. Without it every tier says "acl: disabled".
	ACL bool
	// Net, when set, gives each process its own address (and a wrapper that
	// enters its network namespace); nil runs everything on 127.0.0.1 with
	// free ports.
	Net Network
}

func (s Spec) extra(tier, instance string) string {
	if s.TierExtra == nil {
		return ""
	}
	return s.TierExtra(tier, instance)
}

// Network places each process of a cluster on its own address.
type Network interface {
	// Attach gives the named process an address and returns it with the
	// command prefix that runs a program there.
	Attach(name string) (ip string, wrap []string, err error)
}

// Network ports: with a Network every process has its own address, so the
// ports are fixed.
const (
	netRaftPort  = 7000
	netGRPCPort  = 7001
	netAdminPort = 7002
)

func (s Spec) chain() string {
	if s.RacksPerRegion > 0 {
		return "chain: [global, region, rack, host]\n"
	}
	return ""
}

func (s Spec) control() string {
	t := s.Timing
	return fmt.Sprintf("control:\n  interval: %s\n  lease_ttl: %s\n  grace: %s\n  report_interval: %s\n", t.Interval, t.LeaseTTL, t.Grace, t.ReportInterval)
}

// tierGroup writes the configs of one tier instance's replicas; extra is appended
// to each (chain, policy). Each replica gets a certificate of the cluster's CA
// naming it; parentInstance names the parent's (default global). admin gives
// every replica a listen.admin address (Spec.RaftAdmin).
func (c *Cluster) tierGroup(dir string, nw Network, tier, instance string, replicas int, parent []string, parentInstance, control, extra string, admin bool) ([]*Proc, error) {
	var peers bytes.Buffer
	procs := make([]*Proc, replicas)
	raft := make([]string, replicas)
	var ports []int
	if nw == nil {
		var err error
		if ports, err = FreePorts(3 * replicas); err != nil {
			return nil, err
		}
	}
	for i := 0; i < replicas; i++ {
		id := fmt.Sprintf("%s-%d", instance, i+1)
		p, err := newProc(nw, id)
		if err != nil {
			return nil, err
		}
		p.OperatorTLS, p.Token = c.OperatorTLS, c.Token
		if nw == nil {
			raft[i], p.GRPC = fmt.Sprintf("%s:%d", p.IP, ports[3*i]), fmt.Sprintf("%s:%d", p.IP, ports[3*i+1])
			if admin {
				p.RaftAdmin = fmt.Sprintf("%s:%d", p.IP, ports[3*i+2])
			}
		} else {
			raft[i], p.GRPC = fmt.Sprintf("%s:%d", p.IP, netRaftPort), fmt.Sprintf("%s:%d", p.IP, netGRPCPort)
			if admin {
				p.RaftAdmin = fmt.Sprintf("%s:%d", p.IP, netAdminPort)
			}
		}
		procs[i] = p
		fmt.Fprintf(&peers, "  - {id: %s, raft: \"%s\", grpc: \"%s\"}\n", id, raft[i], p.GRPC)
	}
	for i, p := range procs {
		p.DataDir = filepath.Join(dir, tier, p.Name)
		if err := os.MkdirAll(p.DataDir, 0o755); err != nil {
			return nil, err
		}
		listenAdmin := ""
		if p.RaftAdmin != "" {
			listenAdmin = fmt.Sprintf("  admin: \"%s\"\n", p.RaftAdmin)
		}
		cfg := fmt.Sprintf("tier: %s\ninstance: %s\nnode_id: %s\ndata_dir: %s\nlisten:\n  raft: \"%s\"\n  grpc: \"%s\"\n%sbootstrap: true\npeers:\n%s%s",
			tier, instance, p.Name, p.DataDir, raft[i], p.GRPC, listenAdmin, peers.String(), control)
		if len(parent) > 0 {
			cfg += "parent: [" + strings.Join(quote(parent), ", ") + "]\n"
		}
		if parentInstance != "" {
			cfg += "parent_instance: " + parentInstance + "\n"
		}
		tlsCfg, err := c.issue(filepath.Join(p.DataDir, "tls"), tlsutil.Replica(tier, instance, p.Name), p.IP)
		if err != nil {
			return nil, err
		}
		cfg += tlsCfg + extra
		if !strings.Contains(extra, "acl:") {
			cfg += c.aclSection
			p.Token = c.Token
		}
		p.Config = filepath.Join(p.DataDir, "config.yaml")
		p.Log = filepath.Join(p.DataDir, "log.txt")
		p.Args = []string{tier}
		if err := os.WriteFile(p.Config, []byte(cfg), 0o644); err != nil {
			return nil, err
		}
	}
	return procs, nil
}

// newProc makes the process named name, on its own address when nw is set.
func newProc(nw Network, name string) (*Proc, error) {
	p := &Proc{Name: name, IP: "127.0.0.1"}
	if nw != nil {
		ip, wrap, err := nw.Attach(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		p.IP, p.Wrap = ip, wrap
	}
	return p, nil
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = `"` + s + `"`
	}
	return out
}

// Addrs returns the gRPC addresses of procs.
func Addrs(procs []*Proc) []string {
	out := make([]string, len(procs))
	for i, p := range procs {
		out[i] = p.GRPC
	}
	return out
}

// NewCluster writes the configs of a cluster under dir; Start launches it.
func NewCluster(dir, bin string, s Spec) (*Cluster, error) {
	c := &Cluster{Dir: dir, Bin: bin, Regions: map[string][]*Proc{}, Racks: map[string][]*Proc{}, Hosts: map[string]*Proc{}, HostRegion: map[string]string{}}
	now := time.Now()
	var err error
	if c.ca, err = tlsutil.NewCA("strata e2e CA", now.Add(-time.Hour), now.Add(7*24*time.Hour)); err != nil {
		return nil, err
	}
	if err := c.ca.WriteCA(filepath.Join(dir, "tls", "ca")); err != nil {
		return nil, err
	}
	c.OperatorTLS = filepath.Join(dir, "tls", "operator")
	if _, err := c.issue(c.OperatorTLS, tlsutil.Named(tlsutil.RoleOperator, "e2e")); err != nil {
		return nil, err
	}
	c.aclSection = "acl: disabled\n" // required outside dev mode
	if s.ACL {
		c.Token = "strata_e2e-cluster-bootstrap-token-0123456789"
		file := filepath.Join(dir, "acl-bootstrap-token")
		if err := os.WriteFile(file, []byte(c.Token+"\n"), 0o600); err != nil {
			return nil, err
		}
		c.aclSection = fmt.Sprintf("acl: {enabled: true, bootstrap_token_file: %q, anonymous_http: [healthz, readyz]}\n", file)
	}
	c.Global, err = c.tierGroup(dir, s.Net, "global", "global", s.Replicas, nil, "", s.control(), s.chain()+s.extra("global", "global"), s.RaftAdmin)
	if err != nil {
		return nil, err
	}
	for r := 1; r <= s.Regions; r++ {
		name := fmt.Sprintf("region-%d", r)
		extra := s.chain()
		if s.RegionPolicy != "" {
			extra += "policy: {name: " + s.RegionPolicy + "}\n"
		}
		c.Regions[name], err = c.tierGroup(dir, s.Net, "region", name, s.Replicas, Addrs(c.Global), "", s.control(), extra+s.extra("region", name), s.RaftAdmin)
		if err != nil {
			return nil, err
		}
		// The parents of hosts: the region, or each rack of it.
		parents := map[string][]string{name: Addrs(c.Regions[name])}
		if s.RacksPerRegion > 0 {
			parents = map[string][]string{}
			for k := 1; k <= s.RacksPerRegion; k++ {
				rack := fmt.Sprintf("%s-rack-%d", name, k)
				c.Racks[rack], err = c.tierGroup(dir, s.Net, "rack", rack, s.RackReplicas, Addrs(c.Regions[name]), name, s.control(), s.chain()+s.extra("rack", rack), s.RaftAdmin)
				if err != nil {
					return nil, err
				}
				for _, p := range c.Racks[rack] {
					p.Args = []string{"tier"}
				}
				parents[rack] = Addrs(c.Racks[rack])
			}
		}
		for parentName, parentAddrs := range parents {
			if err := c.addHosts(dir, s, name, parentName, parentAddrs); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func (c *Cluster) addHosts(dir string, s Spec, region, parentName string, parentAddrs []string) error {
	{
		name := parentName
		for h := 1; h <= s.HostsPerRegion; h++ {
			host := fmt.Sprintf("%s-host-%d", name, h)
			p, err := newProc(s.Net, host)
			if err != nil {
				return err
			}
			p.DataDir, p.Args = filepath.Join(dir, "host", host), []string{"host"}
			if err := os.MkdirAll(p.DataDir, 0o755); err != nil {
				return err
			}
			drv := "{kind: synthetic}"
			if s.HostDriver != nil {
				drv = s.HostDriver(host)
			}
			cfg := fmt.Sprintf("host: %s\ndata_dir: %s\nparent: [%s]\ncapacity: {cpu: %g, mem: 64Gi, net: 10Gi, tasks: 1000}\nlabels: {region: %s}\ndriver: %s\nparent_instance: %s\n",
				host, p.DataDir, strings.Join(quote(parentAddrs), ", "), s.HostCPU, region, drv, parentName)
			if parentName != region {
				cfg += "parent_tier: rack\n"
			}
			tlsCfg, err := c.issue(filepath.Join(p.DataDir, "tls"), tlsutil.Named(tlsutil.RoleHost, host), p.IP)
			if err != nil {
				return err
			}
			cfg += tlsCfg
			p.Config = filepath.Join(p.DataDir, "config.yaml")
			p.Log = filepath.Join(p.DataDir, "log.txt")
			if err := os.WriteFile(p.Config, []byte(cfg), 0o644); err != nil {
				return err
			}
			c.Hosts[host] = p
			c.HostRegion[host] = region
		}
	}
	return nil
}

// issue writes a certificate for id (valid for 127.0.0.1) into dir and
// returns the tls section naming it.
func (c *Cluster) issue(dir string, id tlsutil.Identity, ips ...string) (string, error) {
	now := time.Now()
	addrs := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, ip := range ips {
		if a := net.ParseIP(ip); a != nil && !a.Equal(addrs[0]) {
			addrs = append(addrs, a)
		}
	}
	certPEM, keyPEM, err := c.ca.Issue(tlsutil.CertRequest{Identity: id, IPs: addrs, DNS: []string{"localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour)})
	if err != nil {
		return "", err
	}
	if err := c.ca.WritePair(dir, certPEM, keyPEM); err != nil {
		return "", err
	}
	return fmt.Sprintf("tls: {ca: %q, cert: %q, key: %q}\n", filepath.Join(dir, tlsutil.CAFile), filepath.Join(dir, tlsutil.CertFile), filepath.Join(dir, tlsutil.KeyFile)), nil
}

// All lists every process.
func (c *Cluster) All() []*Proc {
	out := append([]*Proc(nil), c.Global...)
	for _, r := range c.Regions {
		out = append(out, r...)
	}
	for _, r := range c.Racks {
		out = append(out, r...)
	}
	for _, h := range c.Hosts {
		out = append(out, h)
	}
	return out
}

// Start launches every process.
func (c *Cluster) Start() error {
	for _, p := range c.All() {
		if err := p.Start(c.Bin); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return nil
}

// Stop stops every process gracefully.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, p := range c.All() {
		wg.Add(1)
		go func(p *Proc) { defer wg.Done(); p.Stop() }(p)
	}
	wg.Wait()
}

// LedgerPaths lists the hosts' ownership ledgers.
func (c *Cluster) LedgerPaths() []string {
	var out []string
	for _, h := range c.Hosts {
		out = append(out, filepath.Join(h.DataDir, "ledger.jsonl"))
	}
	return out
}

// adminToken, when set (a test that turns ACLs on), is sent with every call
// of the clients Admin makes.
var adminToken string

// Admin dials p's Admin service with the cluster's operator certificate (and
// adminToken, when set).
func Admin(p *Proc) (wire.AdminClient, func(), error) {
	st, err := tlsutil.Open(tlsutil.FilesIn(p.OperatorTLS), nil, nil)
	if err != nil {
		return nil, nil, err
	}
	tok := adminToken
	if p.Token != "" {
		tok = p.Token
	}
	cc, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(st.ClientCredentials(tlsutil.IsAnyReplica)),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if tok != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, acl.MetadataKey, acl.Bearer(tok))
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	if err != nil {
		return nil, nil, err
	}
	return wire.NewAdminClient(cc), func() { cc.Close() }, nil
}

// Leader returns the replica of group that leads it, asking each live replica's
// Status.
func Leader(ctx context.Context, group []*Proc) (*Proc, error) {
	for _, p := range group {
		if !p.Running() {
			continue
		}
		a, done, err := Admin(p)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := a.Status(cctx, &wire.StatusRequest{})
		cancel()
		done()
		if err != nil || len(st.Tiers) == 0 || len(st.Tiers[0].Instances) == 0 {
			continue
		}
		addr := st.Tiers[0].Instances[0].LeaderAddress
		for _, q := range group {
			if q.GRPC == addr && q.Running() {
				return q, nil
			}
		}
	}
	return nil, fmt.Errorf("no leader found")
}
