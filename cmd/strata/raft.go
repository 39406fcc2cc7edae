package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces/wire"
)

func init() { commands = append(commands, newRaftCmd) }

// newRaftCmd is "strata raft": cluster membership of a tier's Raft group,
// through the gRPC Admin service of any of its replicas (changes are
// forwarded to the leader and need an admin token when ACLs are on).
func newRaftCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "raft",
		Short: "Inspect and change the membership of a tier's Raft group",
		Long: `Inspect and change the membership of a tier's Raft group through the Admin API
of any of its replicas (--addr: the replica's listen.grpc address, or STRATA_ADDR;
default: the local strata dev cluster's global tier). Changes are forwarded to the
leader. With ACLs on, peers needs a read token and join and remove an admin token
(--token or STRATA_TOKEN).

"strata raft status" reads one replica's Raft state from its read-only Raft admin
endpoint instead (--raft-admin: its listen.admin address).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var cf clientFlags
	cf.registerOn(cmd, cmd.PersistentFlags())
	call := func(out *outputFlag, fn func(context.Context, wire.AdminClient) error) error {
		if err := out.check(); err != nil {
			return err
		}
		if err := cf.check(); err != nil {
			return err
		}
		ctx, c, done, err := cf.admin()
		if err != nil {
			return err
		}
		defer done()
		return remoteCallErr(cf.addr, fn(ctx, c))
	}
	cmd.AddCommand(newRaftPeersCmd(g, call), newRaftStatusCmd(g, &cf.timeout),
		newRaftJoinCmd(g, call), newRaftRemoveCmd(g, call))
	return cmd
}

// raftCall runs one subcommand's call: it checks --output, --addr and
// --timeout (exit code 2), then runs fn against the replica's Admin API under
// the --timeout deadline; fn's error exits with code 1.
type raftCall func(out *outputFlag, fn func(context.Context, wire.AdminClient) error) error

// remoteErr gives failures of the remote call exit code 1 (usage errors are 2).
func remoteErr(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: 1, err: err}
}

func newRaftPeersCmd(g *globalOptions, call raftCall) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the servers of the group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var peers []raftnode.Peer
			if err := call(&out, func(ctx context.Context, c wire.AdminClient) error {
				r, err := c.RaftPeers(ctx, &wire.RaftPeersRequest{})
				for _, p := range r.GetPeers() {
					s := "Nonvoter"
					if p.GetVoter() {
						s = "Voter"
					}
					peers = append(peers, raftnode.Peer{ID: p.GetId(), Address: p.GetAddress(), Suffrage: s, Leader: p.GetLeader()})
				}
				return err
			}); err != nil {
				return err
			}
			return out.print(g.stdout, raftnode.PeersResponse{Peers: peers}, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "ID\tADDRESS\tSUFFRAGE\tLEADER")
				for _, p := range peers {
					lead := ""
					if p.Leader {
						lead = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, p.Address, p.Suffrage, lead)
				}
				return tw.Flush()
			})
		},
	}
	out.register(cmd)
	return cmd
}

func newRaftStatusCmd(g *globalOptions, timeout *time.Duration) *cobra.Command {
	var out outputFlag
	var raftAdmin string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show one replica's view of the group (state, leader, term, indexes)",
		Long: `Show one replica's view of its Raft group, read from its Raft admin endpoint
(--raft-admin: its listen.admin address; the dev cluster's global replica serves it
on 127.0.0.1:7401). The endpoint serves reads only; it needs no token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if _, _, err := net.SplitHostPort(raftAdmin); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--raft-admin %q: must be host:port", raftAdmin)}
			}
			if *timeout <= 0 {
				return &exitError{code: 2, err: fmt.Errorf("--timeout: must be positive (got %v)", *timeout)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			s, err := raftnode.NewClient(raftAdmin).Status(ctx)
			if err != nil {
				return remoteErr(err)
			}
			return out.print(g.stdout, s, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintf(tw, "ID\t%s\nSTATE\t%s\nRAFT ADDRESS\t%s\nLEADER\t%s (%s)\nTERM\t%d\nLAST INDEX\t%d\nCOMMIT INDEX\t%d\nAPPLIED INDEX\t%d\n",
					s.ID, s.State, s.RaftAddr, s.LeaderID, s.LeaderAddr, s.Term, s.LastIndex, s.CommitIndex, s.AppliedIndex)
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&raftAdmin, "raft-admin", devRaftAdminAddr, "Raft admin address of the replica (its listen.admin)")
	out.register(cmd)
	return cmd
}

type raftChangeJSON struct {
	Action   string `json:"action"`
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr,omitempty"`
	OK       bool   `json:"ok"`
	Index    uint64 `json:"index,omitempty"`
}

func newRaftJoinCmd(g *globalOptions, call raftCall) *cobra.Command {
	var out outputFlag
	var admin string
	cmd := &cobra.Command{
		Use:   "join ID RAFT_ADDR",
		Short: "Add a replica (server ID, raft host:port) to the group as a voter",
		Long: `Add a replica to the group as a voter (an admin token when ACLs are on). The
replica must be running with the given ID and listening for Raft at RAFT_ADDR: the
leader first connects to RAFT_ADDR and, with --admin-addr, asks the replica's Raft
admin endpoint for its ID and raft address, and refuses the join (exit code 1,
naming the address) when it cannot reach it or the replica is another one.
Joining a member again is harmless.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, raftAddr := args[0], args[1]
			if id == "" {
				return &exitError{code: 2, err: fmt.Errorf("ID: is required (the new replica's server ID)")}
			}
			if _, _, err := net.SplitHostPort(raftAddr); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("RAFT_ADDR %q: must be host:port", raftAddr)}
			}
			var idx uint64
			if err := call(&out, func(ctx context.Context, c wire.AdminClient) error {
				r, err := c.RaftJoin(ctx, &wire.RaftJoinRequest{Id: id, Address: raftAddr, AdminAddress: admin})
				idx = r.GetIndex()
				return err
			}); err != nil {
				return err
			}
			res := raftChangeJSON{Action: "join", ID: id, RaftAddr: raftAddr, OK: true, Index: idx}
			return out.print(g.stdout, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "joined %s (%s) as a voter\n", id, raftAddr)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&admin, "admin-addr", "", "the new replica's Raft admin address (its listen.admin), to check its ID and raft address first")
	out.register(cmd)
	return cmd
}

func newRaftRemoveCmd(g *globalOptions, call raftCall) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a server from the group",
		Long:  `Remove a server from the group (an admin token when ACLs are on).`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return &exitError{code: 2, err: fmt.Errorf("ID: is required (the server ID to remove)")}
			}
			var idx uint64
			if err := call(&out, func(ctx context.Context, c wire.AdminClient) error {
				r, err := c.RaftRemove(ctx, &wire.RaftRemoveRequest{Id: args[0]})
				idx = r.GetIndex()
				return err
			}); err != nil {
				return err
			}
			res := raftChangeJSON{Action: "remove", ID: args[0], OK: true, Index: idx}
			return out.print(g.stdout, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "removed %s\n", args[0])
				return err
			})
		},
	}
	out.register(cmd)
	return cmd
}
