package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/tiers"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7600", "address to serve the TierPolicy service on")
	policy := flag.String("policy", "greedy", "the built-in policy to serve")
	misbehave := flag.String("misbehave", "", "return bad plans: over-capacity or stale-epoch")
	tlsDir := flag.String("tls", "", "directory with ca.pem, cert.pem and key.pem ('strata tls cert --role plugin'): serve over mutual TLS to tier replicas of the CA only (docs/security.md); default plaintext")
	flag.Parse()
	if err := run(*addr, *policy, *misbehave, *tlsDir); err != nil {
		fmt.Fprintln(os.Stderr, "tierplugin:", err)
		os.Exit(1)
	}
}

func run(addr, policy, misbehave, tlsDir string) error {
	switch misbehave {
	case "", "over-capacity", "stale-epoch":
	default:
		return fmt.Errorf("--misbehave: must be over-capacity or stale-epoch (got %q)", misbehave)
	}
	if _, err := tiers.New(policy, nil); err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	factory := func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
		p, err := tiers.New(policy, cfg)
		if err != nil {
			return nil, err
		}
		return tagged{p, misbehave}, nil
	}
	var opts []grpc.ServerOption
	if tlsDir != "" {
		st, err := tlsutil.Open(tlsutil.FilesIn(tlsDir),
			func(f string, a ...any) { fmt.Fprintf(os.Stderr, "tierplugin: "+f+"\n", a...) }, nil)
		if err != nil {
			return fmt.Errorf("--tls: %w", err)
		}
		// Only tier replicas call a policy plugin.
		opts = append(opts, grpc.Creds(st.ServerCredentials(tlsutil.IsAnyReplica, func(f string, a ...any) { fmt.Fprintf(os.Stderr, "tierplugin: "+f+"\n", a...) })))
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(opts...)
	wire.RegisterTierPolicyServer(srv, wire.NewPolicyServer("tierplugin/"+policy, factory))
	fmt.Fprintf(os.Stderr, "tierplugin: serving policy %s on %s\n", policy, lis.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); srv.GracefulStop() }()
	return srv.Serve(lis)
}

// tagged marks every move's reason as coming from the plugin, and misbehaves on
// request.
type tagged struct {
	interfaces.Policy
	misbehave string
}

func (t tagged) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	plan, err := t.Policy.Plan(ctx, v)
	if err != nil {
		return plan, err
	}
	switch t.misbehave {
	case "over-capacity":
		plan.Moves = overCapacity(v)
	case "stale-epoch":
		for i := range plan.Moves {
			plan.Moves[i].Epoch++
		}
	}
	for i := range plan.Moves {
		if !strings.HasPrefix(plan.Moves[i].Reason, "tierplugin") {
			plan.Moves[i].Reason = "tierplugin: " + plan.Moves[i].Reason
		}
	}
	return plan, nil
}

// overCapacity puts every shard on the first active child.
func overCapacity(v *interfaces.View) []interfaces.Move {
	var to interfaces.ChildID
	for _, c := range v.Children {
		if c.State == interfaces.ChildActive {
			to = c.ID
			break
		}
	}
	owner := map[interfaces.ShardID]interfaces.Assignment{}
	for _, a := range v.Assignments {
		owner[a.Shard] = a
	}
	var moves []interfaces.Move
	for _, s := range v.Shards {
		a := owner[s.ID]
		if to == "" || a.Child == to {
			continue
		}
		moves = append(moves, interfaces.Move{Shard: s.ID, From: a.Child, To: to, Epoch: a.Epoch, Reason: "tierplugin: all on one child", Goal: "none"})
	}
	return moves
}
