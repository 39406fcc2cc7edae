package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// TestSecuredClusterRefusesTheAttacks runs a real hierarchy (strata global,
// strata region, strata host processes) with ACLs on every tier, one
// bootstrap token file shared by all, and an allow-list of the region's
// hosts. Then, as the attacker of issue 22 with no token: the CLI's calls,
// a fake host "evil" with cpu 1e9 registering by its Hello, two Drains of
// the real hosts, and raw writes to the Raft admin endpoint (a voter
// removal, an FSM write) are each refused with a clear error, and nothing
// changes: every shard still runs on the real hosts, none is draining, the
// group keeps its voters.
func TestSecuredClusterRefusesTheAttacks(t *testing.T) {
	dir := workDir(t)
	secret := "strata_e2e-bootstrap-token-0123456789abcdef"
	tokenFile := filepath.Join(dir, "bootstrap-token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hosts := []string{"region-1-host-1", "region-1-host-2"}
	spec := Spec{Replicas: 1, Regions: 1, HostsPerRegion: 2, HostCPU: 32, RaftAdmin: true,
		Timing: Timing{Interval: 300 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 100 * time.Millisecond, ReportInterval: 500 * time.Millisecond},
		TierExtra: func(tier, _ string) string {
			s := fmt.Sprintf("acl: {enabled: true, bootstrap_token_file: %q}\n", tokenFile)
			if tier == "region" {
				s += "children: {allow: [" + strings.Join(hosts, ", ") + "]}\n"
			}
			return s
		}}
	c := startCluster(t, dir, spec)
	ctx := context.Background()
	adminToken = secret
	defer func() { adminToken = "" }()

	const n = 40
	a := admin(t, c.Global[0])
	eventually(t, "job submitted", 20*time.Second, func() error {
		_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "e2e", Parallelism: n, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.1}}}})
		if err != nil && isConflict(err) {
			return nil
		}
		return err
	})
	eventually(t, "all shards on the real hosts", 60*time.Second, func() error { return allPlaced(ctx, c, n) })
	region := c.Regions["region-1"][0]

	// The CLI without a token (with an operator certificate: TLS lets it in,
	// the token check must not).
	cli := exec.Command(c.Bin, "status", "--addr", c.Global[0].GRPC, "--tls", c.OperatorTLS)
	cli.Env = append(os.Environ(), "STRATA_TOKEN=")
	out, err := cli.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "requires an ACL token: give --token or STRATA_TOKEN") {
		t.Errorf("strata status without a token: %v\n%s", err, out)
	}
	cli = exec.Command(c.Bin, "status", "--addr", c.Global[0].GRPC, "--tls", c.OperatorTLS)
	cli.Env = append(os.Environ(), "STRATA_TOKEN="+secret)
	if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "region-1-host-1") {
		t.Errorf("strata status with the bootstrap token (one token across the tree): %v\n%s", err, out)
	}

	// The fake host.
	adminToken = ""
	ra := admin(t, region)
	// evil holds a real host certificate of the cluster's CA (a CA that
	// issued one too many): TLS lets it in, the allow-list must not.
	evilDir := filepath.Join(dir, "tls", "evil")
	if _, err := c.issue(evilDir, tlsutil.Named(tlsutil.RoleHost, "evil")); err != nil {
		t.Fatal(err)
	}
	evil, err := tlsutil.Open(tlsutil.FilesIn(evilDir), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = hello(region.GRPC, evil.ClientCredentials(tlsutil.IsAnyReplica), "evil")
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `hello.child_id: "evil" is not in children.allow`) {
		t.Errorf("evil's Hello: %v", err)
	}
	// Two unauthenticated Drains.
	for _, host := range hosts {
		_, err := ra.Drain(ctx, &wire.DrainRequest{Child: host})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "requires an ACL token") {
			t.Errorf("drain %s without a token: %v", host, err)
		}
	}
	// Raw writes to the Raft admin endpoint.
	for _, w := range []struct {
		path string
		body any
	}{
		{"/v1/raft/remove", map[string]string{"id": region.Name}},
		{"/v1/raft/apply", map[string][]byte{"command": fsm.MustEncode(&fsm.PutChild{Child: interfaces.Child{ID: "evil", Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 1e9}}})}},
		{"/v1/tier/children", map[string]any{"children": []interfaces.Child{{ID: "evil", Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 1e9}}}}},
	} {
		b, _ := json.Marshal(w.body)
		resp, err := http.Post("http://"+region.RaftAdmin+w.path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body.String(), "this replica serves no raw writes") {
			t.Errorf("POST %s: %d %s", w.path, resp.StatusCode, body.String())
		}
	}

	// Nothing changed.
	adminToken = secret
	ra2 := admin(t, region)
	stResp, err := ra2.Status(ctx, &wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range stResp.GetTiers()[0].GetInstances()[0].GetChildren() {
		if cs.GetChild().GetId() == "evil" {
			t.Error("evil is a child of the region")
		}
		if cs.GetChild().GetState() != wire.ChildState_CHILD_STATE_ACTIVE {
			t.Errorf("%s is %v", cs.GetChild().GetId(), cs.GetChild().GetState())
		}
	}
	peers, err := ra2.RaftPeers(ctx, &wire.RaftPeersRequest{})
	if err != nil || len(peers.GetPeers()) != 1 {
		t.Errorf("region peers: %v %v", peers, err)
	}
	if err := allPlaced(ctx, c, n, "evil"); err != nil {
		t.Error(err)
	}
}
