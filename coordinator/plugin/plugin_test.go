package plugin_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/coordinator/plugin"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/tiers"
)

func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tierplugin")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/strata-sched/strata/examples/tierplugin").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// startPlugin runs the plugin binary and waits until it answers.
func startPlugin(t *testing.T, bin, addr string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--addr", addr}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	testutil.Eventually(t, "plugin listening on "+addr, 10*time.Second, func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		c.Close()
		return nil
	})
	return cmd
}

func kill9(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_, _ = cmd.Process.Wait()
}

func view() *interfaces.View {
	v := &interfaces.View{Tier: "region", Instance: "r", Seed: 1}
	for i := 0; i < 2; i++ {
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("h%d", i)), Tier: "host", Capacity: interfaces.Load{CPU: 4}})
	}
	for i := 0; i < 6; i++ {
		v.Shards = append(v.Shards, interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("s%d", i)), Job: "j", Load: interfaces.Load{CPU: 1}})
	}
	return v
}

func TestConfigErrors(t *testing.T) {
	for cfg, want := range map[string]interfaces.PolicyConfig{
		`"address" is required`:                      {},
		`key "timeout": must be a positive duration`: {"address": "x:1", "timeout": "soon"},
		`key "fallback": must be a built-in policy`:  {"address": "x:1", "fallback": "plugin"},
		`unknown policy "nope"`:                      {"address": "x:1", "fallback": "nope"},
	} {
		if _, err := tiers.New(plugin.Name, want); err == nil || !strings.Contains(err.Error(), cfg) {
			t.Errorf("config %v: got %v, want %q", want, err, cfg)
		}
	}
}

// The plugin process plans; killed, the tier falls back and is told why;
// restarted, it is used again.
func TestFallbackAndRecovery(t *testing.T) {
	bin := buildPlugin(t)
	addr := testutil.FreeAddr(t)
	proc := startPlugin(t, bin, addr)
	pol, err := tiers.New(plugin.Name, interfaces.PolicyConfig{"address": addr, "retry": "100ms", "timeout": "1s"})
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*plugin.Policy)
	defer p.Close()
	ctx := context.Background()
	plan, err := p.Plan(ctx, view())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Moves) != 6 || !strings.HasPrefix(plan.Moves[0].Reason, "tierplugin") || !p.Status().Healthy {
		t.Fatalf("plan from the plugin: %+v, status %+v", plan.Moves, p.Status())
	}
	kill9(proc)
	plan, err = p.Plan(ctx, view())
	if err != nil {
		t.Fatalf("fallback failed: %v", err)
	}
	if len(plan.Moves) != 6 || strings.HasPrefix(plan.Moves[0].Reason, "tierplugin") {
		t.Fatalf("after the kill the plan should come from the fallback: %+v", plan.Moves)
	}
	st := p.Status()
	if st.Healthy || st.Failures == 0 || !strings.HasPrefix(st.Describe(), "unhealthy: ") {
		t.Errorf("status after the kill: %+v", st)
	}
	startPlugin(t, bin, addr)
	// Calls within the retry back-off plan with the fallback and change nothing;
	// the first one past it asks the plugin again.
	testutil.Eventually(t, "the restarted plugin used again", 10*time.Second, func() error {
		plan, err := p.Plan(ctx, view())
		if err == nil && len(plan.Moves) > 0 && strings.HasPrefix(plan.Moves[0].Reason, "tierplugin") {
			return nil
		}
		return fmt.Errorf("plan %+v (err %v), status %v", plan.Moves, err, p.Status())
	})
	if !p.Status().Healthy {
		t.Error("plugin used again but not marked healthy")
	}
}

// A plugin's bad plans are refused by the same verification as built-in ones.
func TestBadPlansAreRejected(t *testing.T) {
	bin := buildPlugin(t)
	for _, tt := range []struct {
		misbehave string
		code      balancer.RejectCode
	}{
		{"over-capacity", balancer.RejectCapacity},
		{"stale-epoch", balancer.RejectStaleEpoch},
	} {
		t.Run(tt.misbehave, func(t *testing.T) {
			addr := testutil.FreeAddr(t)
			startPlugin(t, bin, addr, "--misbehave", tt.misbehave)
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			remote, err := wire.DialPolicy(context.Background(), cc, nil)
			if err != nil {
				t.Fatal(err)
			}
			v := view()
			for i, s := range v.Shards { // all placed on h1 at epoch 3 (h1 is overloaded: 6 > 4)
				v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: s.ID, Child: "h1", Epoch: 3})
				_ = i
			}
			plan, err := remote.Plan(context.Background(), v)
			if err != nil {
				t.Fatal(err)
			}
			verdict, err := balancer.VerifyView(v, plan.Moves)
			if err != nil {
				t.Fatal(err)
			}
			if len(verdict.Rejected) == 0 {
				t.Fatalf("bad plan accepted: %+v", plan.Moves)
			}
			for _, r := range verdict.Rejected {
				if r.Code != tt.code || r.Reason == "" {
					t.Errorf("rejection %v (%s), want %v with a reason", r.Code, r.Reason, tt.code)
				}
			}
		})
	}
}

// In the daemons: a region planning through the plugin process places shards;
// with the plugin killed it keeps placing through its fallback.
func TestRegionPlansThroughPlugin(t *testing.T) {
	bin := buildPlugin(t)
	addr := testutil.FreeAddr(t)
	proc := startPlugin(t, bin, addr)
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 2,
		Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second,
		RegionPolicy: plugin.Name, RegionPolicyConfig: interfaces.PolicyConfig{"address": addr, "retry": "200ms", "timeout": "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, err := grpc.NewClient(c.Global.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := wire.NewAdminClient(cc)
	region := c.Regions["region-1"]
	rcc, err := grpc.NewClient(region.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer rcc.Close()
	radmin := wire.NewAdminClient(rcc)
	ctx := context.Background()
	running := func() int {
		n := 0
		for _, h := range c.Hosts {
			n += len(h.Agent().Running())
		}
		return n
	}
	waitRunning := func(want int) {
		t.Helper()
		testutil.Eventually(t, fmt.Sprintf("%d shards running", want), 30*time.Second, func() error {
			if n := running(); n != want {
				return fmt.Errorf("%d shards running, want %d", n, want)
			}
			return nil
		})
	}
	submit := func(job string, n int) {
		t.Helper()
		if _, err := admin.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: job, Parallelism: int64(n), ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Tasks: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	submit("a", 10)
	waitRunning(10)
	ex, err := radmin.Explain(ctx, &wire.ExplainRequest{Shard: "a/0"})
	if err != nil || len(ex.History) == 0 || !strings.HasPrefix(ex.History[0].GetMove().GetReason(), "tierplugin") {
		t.Fatalf("placement not explained as the plugin's: %v %v", ex, err)
	}
	kill9(proc)
	submit("b", 10)
	waitRunning(20)
	st, err := radmin.Status(ctx, &wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if pol := st.Tiers[0].Instances[0].Policy; !strings.Contains(pol, "unhealthy") {
		t.Errorf("status after the plugin died: policy %q, want it marked unhealthy", pol)
	}
	ex, err = radmin.Explain(ctx, &wire.ExplainRequest{Shard: "b/0"})
	if err != nil || len(ex.History) == 0 || strings.HasPrefix(ex.History[0].GetMove().GetReason(), "tierplugin") {
		t.Errorf("b/0 should be placed by the fallback: %v %v", ex, err)
	}

	// The plugin comes back, misbehaving: the tier uses it again (healthy), and
	// the over-capacity plan it returns is refused by the tier's verification,
	// with the reason, while every shard keeps running once.
	startPlugin(t, bin, addr, "--misbehave", "over-capacity")
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := radmin.Status(ctx, &wire.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		pol := st.Tiers[0].Instances[0].Policy
		rejected := false
		for _, r := range region.LastRejections() {
			if r.Code == balancer.RejectCapacity && strings.Contains(r.Reason, "capacity") && strings.HasPrefix(r.Move.Reason, "tierplugin") {
				rejected = true
			}
		}
		if strings.Contains(pol, "healthy") && !strings.Contains(pol, "unhealthy") && rejected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted plugin: policy %q, rejections %v", pol, region.LastRejections())
		}
		// A new job gives the tier something to plan.
		submit(fmt.Sprintf("c%d", time.Now().UnixNano()%1000000), 1)
		time.Sleep(300 * time.Millisecond)
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}
