package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func init() { commands = append(commands, newPlanCmd) }

// planJSON is the output of "strata plan".
type planJSON struct {
	Tier        string             `json:"tier"`
	Instance    string             `json:"instance"`
	Token       string             `json:"token"`
	StateIndex  uint64             `json:"state_index"`
	Status      string             `json:"status"`
	Moves       []planMoveJSON     `json:"moves"`
	Infeasible  int                `json:"infeasible"`
	MaxOverLB   map[string]float64 `json:"max_over_lb"`
	MaxOverMean map[string]float64 `json:"max_over_mean"`
	BytesMoved  int64              `json:"bytes_moved"`
}

type planMoveJSON struct {
	Shard  string  `json:"shard"`
	From   string  `json:"from"`
	To     string  `json:"to"`
	Reason string  `json:"reason"`
	Delta  float64 `json:"delta"`
}

func newPlanCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var drain, fail, policy string
	var seed int64
	cmd := &cobra.Command{
		Use:   "plan [--drain HOST | --fail REGION | --policy P]",
		Short: "Show what would move if a host were drained, a region failed, or another policy ran — without moving anything",
		Long: `Ask the live cluster what it would do, without doing it. The tier instance that
decides (the region of --drain HOST; the global tier for --fail REGION and for
--policy alone) solves its current state with the change and returns the moves it
would make and the placement quality they lead to (max/LB and max/mean per
resource). Nothing is applied.

The plan comes with a token bound to the state it saw: "strata plan apply TOKEN"
carries out exactly that plan, and refuses (exit code 1) once the state has
changed; plan again then. Tokens live 10 minutes on the leader that made them.

For what-if questions about workloads that are not running yet, use the
simulator: "strata sim run FILE".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			if drain != "" && fail != "" {
				return usageErr(fmt.Errorf("--drain and --fail: give one of them"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
			defer cancel()
			conns := newAdminConns()
			defer conns.close()
			roots, err := walkTree(ctx, conns, cf.addr)
			if err != nil {
				return remoteCallErr(cf.addr, err)
			}
			target := roots[0]
			req := &wire.AdminPlanRequest{Policy: policy, Seed: seed}
			switch {
			case drain != "":
				if target, err = findHostParent(roots, drain); err != nil {
					return &exitError{code: 1, err: err}
				}
				req.DrainChildren = []string{drain}
			case fail != "":
				if target.findChild(fail) == nil {
					return &exitError{code: 1, err: fmt.Errorf("region %q: not a child of the global tier: %w", fail, interfaces.ErrNotFound)}
				}
				req.DrainChildren = []string{fail}
			}
			addr := target.LeaderAddress
			if addr == "" {
				addr = target.Address
			}
			a, err := conns.client(addr)
			if err != nil {
				return err
			}
			resp, err := a.Plan(ctx, req)
			if err != nil {
				return remoteCallErr(addr, err)
			}
			res := planOutput(target, addr, resp)
			return out.print(g.stdout, res, func(w io.Writer) error { return printPlan(w, res) })
		},
	}
	cf.register(cmd)
	out.register(cmd)
	f := cmd.Flags()
	f.StringVar(&drain, "drain", "", "plan as if HOST were drained (asks HOST's region)")
	f.StringVar(&fail, "fail", "", "plan as if REGION had failed (asks the global tier)")
	f.StringVar(&policy, "policy", "", "plan with this policy instead of the configured one")
	f.Int64Var(&seed, "seed", 0, "seed of the solve (0: derived from the state index)")
	cmd.AddCommand(newPlanApplyCmd(g))
	return cmd
}

func planOutput(n *tierNode, addr string, resp *wire.AdminPlanResponse) planJSON {
	p := resp.GetPlan()
	res := planJSON{
		Tier: n.Tier, Instance: n.Instance, Token: resp.GetToken() + "@" + addr, StateIndex: resp.GetStateIndex(),
		Status: strings.TrimPrefix(strings.ToLower(p.GetStatus().String()), "plan_status_"), Infeasible: len(p.GetInfeasible()),
		MaxOverLB: p.GetSummary().GetMaxOverLb(), MaxOverMean: p.GetSummary().GetMaxOverMean(), BytesMoved: p.GetSummary().GetBytesMoved(),
	}
	for _, m := range p.GetMoves() {
		res.Moves = append(res.Moves, planMoveJSON{Shard: m.GetShard(), From: m.GetFrom(), To: m.GetTo(), Reason: m.GetReason(), Delta: m.GetDelta()})
	}
	return res
}

func printPlan(w io.Writer, p planJSON) error {
	fmt.Fprintf(w, "%s %s would make %d moves (status %s, state index %d)\n", p.Tier, p.Instance, len(p.Moves), p.Status, p.StateIndex)
	if len(p.Moves) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "SHARD\tFROM\tTO\tREASON")
		for _, m := range p.Moves {
			from := m.From
			if from == "" {
				from = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Shard, from, m.To, m.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	res := make([]string, 0, len(p.MaxOverLB))
	for r := range p.MaxOverLB {
		res = append(res, r)
	}
	sort.Strings(res)
	for _, r := range res {
		fmt.Fprintf(w, "%s: max/LB %.3f, max/mean %.3f\n", r, p.MaxOverLB[r], p.MaxOverMean[r])
	}
	if p.Infeasible > 0 {
		fmt.Fprintf(w, "%d shards could not be placed\n", p.Infeasible)
	}
	fmt.Fprintf(w, "Nothing was applied. To apply exactly this plan: strata plan apply %s\n", p.Token)
	return nil
}

func newPlanApplyCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "apply TOKEN",
		Short: "Apply exactly the plan a 'strata plan' printed, if the state has not changed since",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			token, addr, ok := strings.Cut(args[0], "@")
			if !ok || token == "" || addr == "" {
				return usageErr(fmt.Errorf("TOKEN: must be the TOKEN@ADDRESS that 'strata plan' printed (got %q)", args[0]))
			}
			ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
			defer cancel()
			conns := newAdminConns()
			defer conns.close()
			a, err := conns.client(addr)
			if err != nil {
				return err
			}
			resp, err := a.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: token})
			if err != nil {
				return remoteCallErr(addr, err)
			}
			v := struct {
				MovesCommitted int64  `json:"moves_committed"`
				StateIndex     uint64 `json:"state_index"`
			}{resp.GetMovesCommitted(), resp.GetStateIndex()}
			return out.print(g.stdout, v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "applied: %d moves committed (state index %d)\n", v.MovesCommitted, v.StateIndex)
				return err
			})
		},
	}
	cf.register(cmd)
	out.register(cmd)
	return cmd
}
