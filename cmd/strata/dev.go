package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/dashboard"
	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/interfaces/wire"
)

func init() { commands = append(commands, newDevCmd) }

func newDevCmd(g *globalOptions) *cobra.Command {
	var (
		dataDir        string
		addr, raftAddr string
		httpAddr       string
		regions, hosts int
		shards         int
		policy         string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole hierarchy in one process on loopback, with a sample job",
		Long: `Run the whole hierarchy in one process on loopback: a global tier, regions and
hosts with synthetic workers, every tier a real Raft group (one replica) and every
link a real gRPC session. A sample job is submitted; client commands (strata status,
strata shards, strata explain …) reach it at --addr, their default. It binds
loopback only and runs without ACL tokens (docs/security.md): the client commands
need no --token. Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if regions < 1 || hosts < 1 {
				return fmt.Errorf("--regions and --hosts must be ≥ 1")
			}
			if shards < 0 {
				return fmt.Errorf("--shards must be ≥ 0")
			}
			// Dev mode runs without TLS, so nothing of it may be reachable
			// from the network (docs/security.md).
			for _, a := range []struct{ flag, addr string }{{"--addr", addr}, {"--raft-admin", raftAddr}, {"--http", httpAddr}} {
				if a.addr == "" && a.flag == "--raft-admin" {
					continue
				}
				if err := checkLoopback(a.flag, a.addr); err != nil {
					return usageErr(fmt.Errorf("%w (strata dev runs without TLS and binds loopback only)", err))
				}
			}
			dir := dataDir
			if dir == "" {
				d, err := os.MkdirTemp("", "strata-dev-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				dir = d
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			c, err := devcluster.Start(devcluster.Options{Dir: dir, GlobalAddr: addr, GlobalRaftAdmin: raftAddr, GlobalHTTP: httpAddr, Regions: regions, HostsPerRegion: hosts, Policy: policy})
			if err != nil {
				return err
			}
			defer c.Close()
			if shards > 0 {
				if err := submitSample(ctx, c.Global.GRPCAddr(), shards); err != nil {
					return err
				}
			}
			fmt.Fprintf(g.stdout, "Strata dev cluster is up: global tier at %s, %d regions × %d hosts, data in %s.\n", c.Global.GRPCAddr(), regions, hosts, dir)
			if shards > 0 {
				fmt.Fprintf(g.stdout, "Submitted job \"sample\" with %d shards.\n", shards)
			}
			printEndpoints(g.stdout, c.Endpoints())
			fmt.Fprintln(g.stdout, devHint(invokedAs(), c.Global.GRPCAddr(), shards))
			fmt.Fprintln(g.stdout, "Press Ctrl-C to stop.")
			<-ctx.Done()
			fmt.Fprintln(g.stdout, "stopping")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "keep the cluster's data here (default: a temporary directory, removed on exit)")
	f.StringVar(&addr, "addr", devAdminAddr, "address of the global tier's Admin API")
	f.StringVar(&raftAddr, "raft-admin", devRaftAdminAddr, "address of the global replica's Raft admin endpoint (strata raft)")
	f.StringVar(&httpAddr, "http", devHTTPAddr, "address of the global replica's HTTP server: the dashboard (/ui/), /metrics, /healthz, /readyz")
	f.IntVar(&regions, "regions", 2, "number of regions")
	f.IntVar(&hosts, "hosts", 4, "hosts per region")
	f.IntVar(&shards, "shards", 64, "shards of the sample job (0: none)")
	f.StringVar(&policy, "policy", "local", "policy of the global and region tiers")
	return cmd
}

func submitSample(ctx context.Context, addr string, shards int) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = wire.NewAdminClient(cc).SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{
		Id: "sample", Parallelism: int64(shards),
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Mem: 512 << 20, Net: 1 << 20, Tasks: 1}, InputRate: 1000, StateBytes: 64 << 20, LatencySloNanos: int64(100 * time.Millisecond)},
	}})
	return err
}

// devHint is what "strata dev" suggests trying, with the binary as it was
// invoked (make run starts ./bin/strata, which is not on the PATH), and
// STRATA_ADDR when the cluster is not at the client commands' default.
func devHint(self, addr string, shards int) string {
	if addr != devAdminAddr {
		self = "STRATA_ADDR=" + addr + " " + self
		return fmt.Sprintf("Try, in another terminal: %[1]s status · %[1]s shards · %[1]s host drain region-1-host-1", self)
	}
	if shards > 0 {
		return fmt.Sprintf("Try, in another terminal: %[1]s status · %[1]s shards --job sample · %[1]s explain sample/0 · %[1]s host drain region-1-host-1", self)
	}
	return fmt.Sprintf("Try, in another terminal: %[1]s status · %[1]s job submit deploy/examples/job.yaml · %[1]s host drain region-1-host-1", self)
}

// invokedAs is how to run this binary from the current directory.
func invokedAs() string {
	cwd, _ := os.Getwd()
	return commandName(os.Args[0], cwd)
}

// commandName is "strata" for a binary found on the PATH (arg0 without a
// directory) or one outside cwd (go run builds in a temporary directory),
// and "./" plus its path relative to cwd for one under cwd ("./bin/strata"
// for make run, which starts $(CURDIR)/bin/strata).
func commandName(arg0, cwd string) string {
	if !strings.ContainsRune(arg0, filepath.Separator) || cwd == "" {
		return "strata"
	}
	abs := arg0
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, abs)
	}
	rel, err := filepath.Rel(cwd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "strata"
	}
	return "." + string(filepath.Separator) + rel
}

// devHTTPAddr is where strata dev serves the dashboard and the global tier's
// metrics by default.
const devHTTPAddr = "127.0.0.1:7500"

// printEndpoints lists where each daemon of the dev cluster serves its
// dashboard, health and metrics (every port but the global tier's is free
// when the cluster starts, so they are printed here).
func printEndpoints(w io.Writer, eps []devcluster.Endpoint) {
	if len(eps) == 0 {
		return
	}
	g := eps[0]
	fmt.Fprintf(w, "Dashboard: http://%s%s\n", g.HTTP, dashboard.Path)
	fmt.Fprintf(w, "Health:    http://%s/healthz · http://%s/readyz\n", g.HTTP, g.HTTP)
	fmt.Fprintln(w, "Metrics (Prometheus targets, one per daemon):")
	for _, e := range eps {
		fmt.Fprintf(w, "  %-7s %-18s http://%s/metrics\n", e.Tier, e.Name, e.HTTP)
	}
}
