package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/interfaces/wire"
)

func init() { commands = append(commands, newDevCmd) }

func newDevCmd(g *globalOptions) *cobra.Command {
	var (
		dataDir        string
		addr, raftAddr string
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
strata shards, strata explain …) reach it at --addr, their default. Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if regions < 1 || hosts < 1 {
				return fmt.Errorf("--regions and --hosts must be ≥ 1")
			}
			if shards < 0 {
				return fmt.Errorf("--shards must be ≥ 0")
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
			c, err := devcluster.Start(devcluster.Options{Dir: dir, GlobalAddr: addr, GlobalRaftAdmin: raftAddr, Regions: regions, HostsPerRegion: hosts, Policy: policy})
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
			if shards > 0 {
				fmt.Fprintln(g.stdout, "Try, in another terminal: strata status · strata shards --job sample · strata explain sample/0 · strata host drain region-1-host-1")
			} else {
				fmt.Fprintln(g.stdout, "Try, in another terminal: strata status · strata job submit deploy/examples/job.yaml · strata host drain region-1-host-1")
			}
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
