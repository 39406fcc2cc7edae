package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// rogueParent is issue 22's rogue parent: a Session server that answers
// every Hello with a lease of an hour and Assigns of shards at epoch 2^62.
// sessions counts the sessions that reached it past the TLS handshake.
type rogueParent struct {
	wire.UnimplementedSessionServer
	shards   []string
	sessions atomic.Int64
}

func (r *rogueParent) Connect(s grpc.BidiStreamingServer[wire.ChildMessage, wire.ParentMessage]) error {
	r.sessions.Add(1)
	if _, err := s.Recv(); err != nil {
		return err
	}
	if err := s.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: &wire.LeaseGrant{LeaseId: "rogue", TtlNanos: int64(time.Hour)}}}); err != nil {
		return err
	}
	for _, id := range r.shards {
		if err := s.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_Assign{Assign: &wire.Assign{Shard: &wire.Shard{Id: id, Load: &wire.Load{Cpu: 0.1}}, Epoch: 1 << 62}}}); err != nil {
			return err
		}
	}
	<-s.Context().Done()
	return nil
}

// TestRogueParentOnRealProcesses reruns issue 22's rogue parent on a cluster
// of processes: a host restarted with its parent addresses served by rogue
// Session servers holding valid certificates of the cluster's CA for other
// identities (a replica of another region, and a stolen host certificate)
// refuses both in the TLS handshake, so no rogue session ever starts and the
// host takes no Assign. Its shards are re-placed on the other host by the
// real region, and the hosts' ledgers show every shard on exactly one host,
// never two at once.
func TestRogueParentOnRealProcesses(t *testing.T) {
	dir := workDir(t)
	// ACL: the Admin calls below carry the cluster's bootstrap token (Spec.ACL).
	spec := Spec{Replicas: 1, Regions: 1, HostsPerRegion: 2, HostCPU: 16, ACL: true,
		Timing: Timing{Interval: 300 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 100 * time.Millisecond, ReportInterval: 500 * time.Millisecond}}
	c := startCluster(t, dir, spec)
	ctx := context.Background()
	a := admin(t, c.Global[0])
	const n = 20
	eventually(t, "job submitted", 20*time.Second, func() error {
		_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "rogue", Parallelism: n,
			ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Tasks: 1}}}})
		if err != nil && isConflict(err) {
			return nil
		}
		return err
	})
	eventually(t, "all shards owned", 60*time.Second, func() error { return allPlaced(ctx, c, n) })
	// ACLs are on: the same call without the token is refused.
	cli := exec.Command(c.Bin, "status", "--addr", c.Global[0].GRPC, "--tls", c.OperatorTLS)
	cli.Env = append(os.Environ(), "STRATA_TOKEN=")
	if out, err := cli.CombinedOutput(); err == nil || !strings.Contains(string(out), "requires an ACL token") {
		t.Errorf("strata status without a token on a Spec.ACL cluster: %v\n%s", err, out)
	}

	var shards []string
	for i := range n {
		shards = append(shards, fmt.Sprintf("rogue/%d", i))
	}
	// The rogues: valid certificates of the cluster's CA, wrong identities.
	rogues := []struct {
		id   tlsutil.Identity
		want string // in the host's log
	}{
		{tlsutil.Replica(interfaces.TierRegion, "region-2", "region-2-1"), "peer certificate names region region-2 replica region-2-1"},
		{tlsutil.Named(tlsutil.RoleHost, "region-1-host-2"), "peer certificate names host region-1-host-2"},
	}
	var addrs []string
	var servers []*rogueParent
	for i, r := range rogues {
		rdir := filepath.Join(dir, "rogue", fmt.Sprint(i))
		if _, err := c.issue(rdir, r.id, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
		st, err := tlsutil.Open(tlsutil.FilesIn(rdir), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.Creds(st.ServerCredentials(nil, t.Logf)))
		rp := &rogueParent{shards: shards}
		wire.RegisterSessionServer(srv, rp)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		addrs = append(addrs, lis.Addr().String())
		servers = append(servers, rp)
	}

	// host-1 restarts with only the rogues as its parent.
	victim, other := "region-1-host-1", "region-1-host-2"
	h := c.Hosts[victim]
	h.Stop()
	eventually(t, victim+" stopped", 20*time.Second, func() error {
		if h.Running() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	restarted := time.Now().UnixNano()
	cfg, err := os.ReadFile(h.Config)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(cfg), "\n") {
		if strings.HasPrefix(l, "parent: ") {
			l = "parent: [" + strings.Join(quote(addrs), ", ") + "]"
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(h.Config, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(c.Bin); err != nil {
		t.Fatal(err)
	}
	for _, r := range rogues {
		eventually(t, victim+" logs the refused rogue: "+r.want, 30*time.Second, func() error {
			log, _ := os.ReadFile(h.Log)
			if !strings.Contains(string(log), r.want) {
				return fmt.Errorf("not in %s", h.Log)
			}
			return nil
		})
	}
	// The real region re-places the shards of the silent host on the other.
	eventually(t, "every shard on "+other, 60*time.Second, func() error { return allPlaced(ctx, c, n, victim) })
	for i, rp := range servers {
		if got := rp.sessions.Load(); got != 0 {
			t.Errorf("rogue %s: %d session(s) got past the handshake", rogues[i].id, got)
		}
	}
	want := make([]interfaces.ShardID, n)
	for i, s := range shards {
		want[i] = interfaces.ShardID(s)
	}
	// The region's view can run ahead of the hosts' (an Assign on its way):
	// wait until the ledgers show every shard running, then judge them.
	var res *ledger.Result
	eventually(t, "the ledgers show every shard running on one host", 30*time.Second, func() error {
		var err error
		if res, err = ledger.Check(c.LedgerPaths()...); err != nil {
			return err
		}
		res.ExpectRunning(want)
		return res.Err()
	})
	for s, hosts := range res.Running {
		if len(hosts) != 1 || hosts[0] != other {
			t.Errorf("%s runs on %v at the end, want only %s", s, hosts, other)
		}
	}
	for _, iv := range res.Intervals {
		if iv.Host == victim && iv.Start >= restarted {
			t.Errorf("%s started %s (epoch %d) after its restart with the rogue parents", victim, iv.Shard, iv.Epoch)
		}
	}
}
