package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/sim"
)

func init() { commands = append(commands, newPlanCmd) }

// planJSON is the output of "strata plan".
type planJSON struct {
	Tier       string         `json:"tier"`
	Instance   string         `json:"instance"`
	Token      string         `json:"token"`
	StateIndex uint64         `json:"state_index"`
	Status     string         `json:"status"`
	Moves      []planMoveJSON `json:"moves"`
	Infeasible int            `json:"infeasible"`
	// Applicable: "plan apply" accepts the token: no shard placed now is left
	// with nowhere to go (stranded); a plan that strands some is shown but
	// refused. Shards unplaced before and still unplaceable do not count.
	Applicable  bool               `json:"applicable"`
	Stranded    int                `json:"stranded"`
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
	var drain, fail, policy, scenario string
	var seed int64
	cmd := &cobra.Command{
		Use:   "plan [--drain HOST | --fail REGION | --policy P | --scenario FILE]",
		Short: "Show what would move if a host were drained, a region failed, or another policy ran — without moving anything",
		Long: `Ask the live cluster what it would do, without doing it. The tier instance that
decides (the region of --drain HOST; the global tier for --fail REGION and for
--policy alone) solves its current state with the change and returns the moves it
would make and the placement quality they lead to (max/LB and max/mean per
resource). Nothing is applied.

The plan comes with a token bound to the state it saw: "strata plan apply TOKEN"
carries out exactly that plan, and refuses (exit code 1) once the state has
changed; plan again then. Applying the token of --drain HOST or --fail REGION
leaves that child draining until "strata host undrain HOST" or "strata region
undrain REGION". A plan that could not place every shard (status
infeasible, e.g. --fail of the last region with room) is shown without an apply
hint, and "plan apply" refuses its token. Tokens live 10 minutes on the leader
that made them.

--scenario FILE simulates a what-if on the live state. The cluster's hosts
(capacities, labels, states), its shards (loads as their hosts measured them,
else as declared; rates, state sizes, constraints) and their current
assignment are read through the Admin API and become the simulator's topology,
workload and starting point (not a fresh placement). FILE is a scenario file (docs/simulation.md) without topology and
without workload jobs, replay or arrivals — those are errors naming the line,
since the live state is the topology and the workload. It may give events on the
live hosts and regions by name (host_fail, drain, region_loss, add_hosts, ...),
load changes on the live jobs by name (workload.steps, spikes, hot, diurnal),
the policies to compare (default: one policy named "live" with the cluster's own
global and region policies), duration (default 10m), tick, model and assertions.
The output is the simulator's summary per policy (utilization, max/LB, latency,
lag, moves, bytes moved, assertions) and the predicted moves: their count and
bytes over the run, and every shard the simulator has moved by the end of the
first control interval (longer when a host or region fails at t=0, to include
its detection), with where from and where to.

The token of --scenario is a tier's own plan, made by the Plan call of the
instance that decides: the changes FILE makes at t=0 that a tier can plan for —
host_fail and drain (the host's region treats the host as draining), and
region_loss (the global tier treats the region as draining) — solved with the
chosen policy (--policy NAME: one of FILE's policies, by name; default the
first; the cluster's configured policy for the default "live"). With no such
change, it is the global tier's plan for the current state under that policy.
One token per deciding instance is printed. The simulator's predicted moves and
the tier's plan are computed separately (the simulator runs the control loop
over time; the plan is one solve now), so they can differ: the output says how
many of the plan's moves the simulator also made. "plan apply" applies the
tier's plan. Changes at t=0 that no plan expresses (add_hosts, host_slow, recoveries)
and later events are in the simulation only. A failed assertion exits with 1
after printing.

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
			// A given --drain or --fail must name a child: an empty one used to
			// plan a global rebalance without a word.
			for _, f := range []struct{ flag, id string }{{"drain", drain}, {"fail", fail}} {
				if cmd.Flags().Changed(f.flag) {
					if err := interfaces.ValidateID("--"+f.flag, f.id); err != nil {
						return usageErr(err)
					}
				}
			}
			if drain != "" && fail != "" {
				return usageErr(fmt.Errorf("--drain and --fail: give one of them"))
			}
			if scenario != "" && (drain != "" || fail != "") {
				return usageErr(fmt.Errorf("--scenario: give the drains and failures as events in the file, not with --drain or --fail"))
			}
			ctx, conns, done := cf.connect()
			defer done()
			if scenario != "" {
				return planScenario(ctx, g, conns, cf.addr, scenario, policy, seed, &out)
			}
			roots, err := walkTree(ctx, conns, cf.addr)
			if err != nil {
				return err
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
				if target.FindChild(fail) == nil {
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
	f.StringVar(&policy, "policy", "", "plan with this policy instead of the configured one (with --scenario: the file's policy the token is made with)")
	f.StringVar(&scenario, "scenario", "", "simulate the what-if in FILE (events, load changes, policies) from the live state; see above")
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
		Moves: []planMoveJSON{}, // "moves": [] in JSON when there are none
	}
	res.Stranded = int(resp.GetStranded())
	res.Applicable = res.Stranded == 0
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
	if !p.Applicable {
		fmt.Fprintf(w, "Nothing was applied. This plan cannot be applied, as it leaves shards placed now with nowhere to go: make room (undrain, add capacity) and plan again.\n")
		return nil
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
		Long: `Apply exactly the plan a 'strata plan' printed, if the state of the tier
instance that made it has not changed since. TOKEN is the TOKEN@ADDRESS it
printed; ADDRESS is where that instance's leader answered.

With --addr or STRATA_ADDR set, that address is asked first (any replica of the
instance forwards to its leader; useful when ADDRESS is not reachable from here).
When the instance there does not know the token — it was made by another tier
instance, e.g. a region's plan asked through the global tier's address — ADDRESS
is asked. Without either, ADDRESS is asked. A malformed TOKEN is a usage error
(exit code 2).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			token, tokAddr, ok := strings.Cut(args[0], "@")
			if !ok || token == "" || tokAddr == "" {
				return usageErr(fmt.Errorf("TOKEN: must be the TOKEN@ADDRESS that 'strata plan' printed (got %q)", args[0]))
			}
			if _, _, err := net.SplitHostPort(tokAddr); err != nil {
				return usageErr(fmt.Errorf("TOKEN %q: the address after @ must be host:port (got %q): %w", args[0], tokAddr, interfaces.ErrInvalid))
			}
			// --addr or STRATA_ADDR, when given, is asked first: the token's
			// address may not be reachable from here, and any replica of the
			// instance forwards to its leader. A token made by another
			// instance (a region's, with --addr at the global tier) is unknown
			// there; then the token's own address is asked.
			addrs := []string{tokAddr}
			if cf.addrGiven() && cf.addr != tokAddr {
				addrs = []string{cf.addr, tokAddr}
			}
			ctx, conns, done := cf.connect()
			defer done()
			var resp *wire.ApplyPlanResponse
			for i, addr := range addrs {
				a, err := conns.client(addr)
				if err != nil {
					return err
				}
				resp, err = a.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: token})
				if err == nil {
					break
				}
				if i+1 < len(addrs) && errors.Is(wire.FromStatus(err), interfaces.ErrNotFound) {
					continue
				}
				if addr == tokAddr && status.Code(err) == codes.Unavailable {
					return &exitError{code: 1, err: fmt.Errorf("cannot reach the tier instance that made the plan at %s (the address in the token; if it is reachable from here under another address, give one of that instance's replicas with --addr): %s", tokAddr, status.Convert(err).Message())}
				}
				return remoteCallErr(addr, err)
			}
			v := struct {
				MovesCommitted int64  `json:"moves_committed"`
				MovesRefused   int64  `json:"moves_refused"`
				StateIndex     uint64 `json:"state_index"`
			}{resp.GetMovesCommitted(), resp.GetMovesRefused(), resp.GetStateIndex()}
			if err := out.print(g.stdout, v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "applied: %d moves committed, %d refused (state index %d)\n", v.MovesCommitted, v.MovesRefused, v.StateIndex)
				return err
			}); err != nil {
				return err
			}
			if v.MovesRefused > 0 {
				// The plan was applied in part: the state moved under it.
				return &exitError{code: 1, err: fmt.Errorf("%d of the plan's moves were refused (the state changed under them; see strata explain); plan again for the rest", v.MovesRefused)}
			}
			return nil
		},
	}
	cf.register(cmd)
	out.register(cmd)
	return cmd
}

// liveSource is what "plan --scenario" read of the live cluster: the state the
// simulator starts from, and where each tier instance's leader answers.
type liveSource struct {
	state    *sim.LiveState
	global   *tierNode            // its leader address in LeaderAddress
	regions  map[string]*tierNode // region → its instance (leader address in LeaderAddress)
	unplaced int
	measured int // shards with a measured load
}

// readLive reads the live state through the Admin API at addr, which must serve
// the global tier: its regions, each region's hosts (capacity, labels, state),
// every shard and its region and host. Only the chain global → region → host is
// supported.
func readLive(ctx context.Context, conns *adminConns, addr string) (*liveSource, error) {
	status := func(a string) (*wire.InstanceStatus, string, error) {
		c, err := conns.client(a)
		if err != nil {
			return nil, "", err
		}
		st, err := c.Status(ctx, &wire.StatusRequest{})
		if err != nil {
			return nil, "", remoteCallErr(a, err)
		}
		if len(st.GetTiers()) == 0 || len(st.GetTiers()[0].GetInstances()) == 0 {
			return nil, "", &exitError{code: 1, err: fmt.Errorf("the Admin API at %s returned no tier instance in its status", a)}
		}
		is := st.GetTiers()[0].GetInstances()[0]
		leader := is.GetLeaderAddress()
		if leader == "" {
			leader = a
		}
		if st.GetTiers()[0].GetTier() == interfaces.TierGlobal || st.GetTiers()[0].GetTier() == interfaces.TierRegion {
			return is, leader, nil
		}
		return nil, "", &exitError{code: 1, err: fmt.Errorf("the Admin API at %s serves the %s tier; --scenario supports the chain global → region → host", a, st.GetTiers()[0].GetTier())}
	}
	list := func(a string) ([]*wire.ShardInfo, error) {
		c, err := conns.client(a)
		if err != nil {
			return nil, err
		}
		resp, err := c.ListShards(ctx, &wire.ListShardsRequest{})
		if err != nil {
			return nil, remoteCallErr(a, err)
		}
		return resp.GetShards(), nil
	}
	gi, gaddr, err := status(addr)
	if err != nil {
		return nil, err
	}
	src := &liveSource{state: &sim.LiveState{GlobalPolicy: policyName(gi.GetPolicy())}, regions: map[string]*tierNode{},
		global: &tierNode{Tier: interfaces.TierGlobal, Instance: gi.GetInstance(), Address: addr, LeaderAddress: gaddr, StateIndex: gi.GetStateIndex()}}
	type placedAt struct{ region, host string }
	hostOf := map[string]placedAt{}
	measured := map[string]interfaces.Load{}
	for _, cs := range gi.GetChildren() {
		region := cs.GetChild().GetId()
		if cs.GetChild().GetTier() != interfaces.TierRegion {
			return nil, &exitError{code: 1, err: fmt.Errorf("child %s of the global tier is a %s; --scenario supports the chain global → region → host", region, cs.GetChild().GetTier())}
		}
		if cs.GetAddress() == "" {
			return nil, &exitError{code: 1, err: fmt.Errorf("region %s: the global tier knows no Admin address for it, so its hosts cannot be read", region)}
		}
		ri, raddr, err := status(cs.GetAddress())
		if err != nil {
			return nil, fmt.Errorf("region %s: %w", region, err)
		}
		src.regions[region] = &tierNode{Tier: interfaces.TierRegion, Instance: ri.GetInstance(), Address: cs.GetAddress(), LeaderAddress: raddr, StateIndex: ri.GetStateIndex()}
		if src.state.RegionPolicy == "" {
			src.state.RegionPolicy = policyName(ri.GetPolicy())
		}
		regionState := cs.GetChild().GetState()
		for _, hs := range ri.GetChildren() {
			c, err := wire.ChildFromWire(hs.GetChild())
			if err != nil {
				return nil, &exitError{code: 1, err: fmt.Errorf("region %s: %w", region, err)}
			}
			if c.Tier != interfaces.TierHost {
				return nil, &exitError{code: 1, err: fmt.Errorf("child %s of region %s is a %s; --scenario supports the chain global → region → host", c.ID, region, c.Tier)}
			}
			switch {
			case regionState == wire.ChildState_CHILD_STATE_FAILED:
				c.State = interfaces.ChildFailed
			case regionState == wire.ChildState_CHILD_STATE_DRAINING && c.State == interfaces.ChildActive:
				c.State = interfaces.ChildDraining
			}
			src.state.Hosts = append(src.state.Hosts, sim.LiveHost{Name: string(c.ID), Region: region, Capacity: c.Capacity, Labels: c.Labels, State: c.State})
		}
		infos, err := list(raddr)
		if err != nil {
			return nil, fmt.Errorf("region %s: %w", region, err)
		}
		for _, info := range infos {
			if pl := info.GetPlacement(); len(pl) > 0 && pl[0].GetChild() != "" {
				hostOf[info.GetShard().GetId()] = placedAt{region, pl[0].GetChild()}
				if m := info.GetMeasured(); m != nil {
					l, err := wire.LoadFromWire(m)
					if err != nil {
						return nil, &exitError{code: 1, err: fmt.Errorf("region %s: shard %s: measured: %w", region, info.GetShard().GetId(), err)}
					}
					measured[info.GetShard().GetId()] = l
				}
			}
		}
	}
	infos, err := list(gaddr)
	if err != nil {
		return nil, err
	}
	for _, info := range infos {
		sh, err := wire.ShardFromWire(info.GetShard())
		if err != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf("global tier: %w", err)}
		}
		ls := sim.LiveShard{Shard: sh}
		if pl := info.GetPlacement(); len(pl) > 0 {
			ls.Region = pl[0].GetChild()
		}
		// The host counts only when the shard's region (as the global tier
		// sees it) is the region that placed it.
		if at, ok := hostOf[string(sh.ID)]; ok && at.region == ls.Region {
			ls.Host = at.host
			if m, ok := measured[string(sh.ID)]; ok {
				ls.Measured = m
				src.measured++
			}
		}
		if ls.Host == "" {
			src.unplaced++
		}
		src.state.Shards = append(src.state.Shards, ls)
	}
	return src, nil
}

// policyName is the registry name in an InstanceStatus.policy: what comes
// before the first '(' or ':' — "local" → "local", "plugin(127.0.0.1:7610,
// fallback local): healthy" → "plugin" (the address has a ':' too).
func policyName(s string) string {
	if i := strings.IndexAny(s, "(:"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// scenarioPlanJSON is the output of "strata plan --scenario".
type scenarioPlanJSON struct {
	Scenario   string          `json:"scenario"`
	Live       liveJSON        `json:"live"`
	Simulation sim.Report      `json:"simulation"`
	Predicted  []predictedJSON `json:"predicted"`
	// Plans are the tier plans for the changes at t=0, one per deciding
	// instance, each with its token.
	Plans []planJSON `json:"plans"`
	// Agreement compares each tier plan with the simulation's first window.
	Agreement []agreementJSON `json:"agreement"`
	// NotInPlans lists what the simulation has and the tier plans do not.
	NotInPlans []string `json:"not_in_plans,omitempty"`
}

// agreementJSON says how many of a tier plan's moves the simulator (with the
// plan's policy) also made in its first window: the same shard to the same
// child (a host for a region's plan, a region for the global tier's).
type agreementJSON struct {
	Tier      string `json:"tier"`
	Instance  string `json:"instance"`
	Policy    string `json:"policy"`
	PlanMoves int    `json:"plan_moves"`
	SameInSim int    `json:"same_in_sim"`
	SimMoves  int    `json:"sim_moves"`
}

func agreement(pl planJSON, policy string, predicted []predictedJSON) agreementJSON {
	a := agreementJSON{Tier: pl.Tier, Instance: pl.Instance, Policy: policy, PlanMoves: len(pl.Moves)}
	var first []sim.PlanMove
	for _, pr := range predicted {
		if pr.Policy == policy {
			first = pr.FirstMoves
		}
	}
	to := map[string]string{}
	for _, m := range first {
		if pl.Tier == interfaces.TierGlobal {
			to[m.Shard] = m.ToRegion
			if m.ToRegion != m.FromRegion {
				a.SimMoves++
			}
		} else if m.FromRegion == pl.Instance || m.ToRegion == pl.Instance {
			to[m.Shard] = m.To
			a.SimMoves++
		}
	}
	for _, m := range pl.Moves {
		if t, ok := to[m.Shard]; ok && t == m.To {
			a.SameInSim++
		}
	}
	return a
}

type liveJSON struct {
	Regions  int `json:"regions"`
	Hosts    int `json:"hosts"`
	Shards   int `json:"shards"`
	Unplaced int `json:"unplaced"`
	// Measured counts the shards whose host reported a measured load (used in
	// place of the declared one).
	Measured     int               `json:"measured"`
	StateIndexes map[string]uint64 `json:"state_indexes"`
}

// predictedJSON is one policy's predicted moves: over the whole run (from the
// simulator's summary) and the shards moved by the end of the first window.
type predictedJSON struct {
	Policy          string         `json:"policy"`
	Moves           int            `json:"moves"`
	BytesMoved      int64          `json:"bytes_moved"`
	FirstWindow     string         `json:"first_window"`
	FirstMoves      []sim.PlanMove `json:"first_moves"`
	FirstBytesMoved int64          `json:"first_bytes_moved"`
}

func planScenario(ctx context.Context, g *globalOptions, conns *adminConns, addr, file, policy string, seed int64, out *outputFlag) error {
	if _, err := os.Stat(file); err != nil {
		return usageErr(fmt.Errorf("--scenario: %w", err))
	}
	src, err := readLive(ctx, conns, addr)
	if err != nil {
		return err
	}
	sc, err := sim.LoadPlan(file, src.state)
	if err != nil {
		return usageErr(err)
	}
	var names []string
	for _, p := range sc.Policies {
		names = append(names, p.Name)
	}
	spec := sc.Policies[0]
	viaLive := spec.Name == sim.LivePolicy && len(sc.Policies) == 1
	if policy != "" {
		found := false
		for _, p := range sc.Policies {
			if p.Name == policy {
				spec, found = p, true
			}
		}
		switch {
		case found:
			viaLive = false
		case viaLive:
			// No policies in the file: --policy names the policy of both tiers,
			// in the simulation as in the plan.
			if !sim.PolicyKnown(policy) {
				return usageErr(fmt.Errorf("--policy %q: %s lists no policies, and this is not a policy the simulator can build (known: %s): %w",
					policy, file, strings.Join(sim.PolicyNames(), ", "), interfaces.ErrNotFound))
			}
			src.state.GlobalPolicy, src.state.RegionPolicy = policy, policy
			if sc, err = sim.LoadPlan(file, src.state); err != nil {
				return usageErr(err)
			}
			spec, viaLive = sc.Policies[0], false
		default:
			return usageErr(fmt.Errorf("--policy %q: not a policy of %s (it has %s)", policy, file, strings.Join(names, ", ")))
		}
	}

	res := scenarioPlanJSON{Scenario: sc.Name, Live: liveJSON{Regions: len(src.regions), Hosts: len(src.state.Hosts), Shards: len(src.state.Shards),
		Unplaced: src.unplaced, Measured: src.measured, StateIndexes: map[string]uint64{"global/" + src.global.Instance: src.global.StateIndex}}}
	for name, n := range src.regions {
		res.Live.StateIndexes["region/"+name] = n.StateIndex
	}
	simRes, err := sim.Run(ctx, sc, sim.Options{})
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("simulation: %w", err)}
	}
	res.Simulation = simRes.Report(sc)
	for _, p := range simRes.Policies {
		moves, bytes, err := sim.FirstMoves(ctx, sc, p.Summary.Policy, 0)
		if err != nil {
			return &exitError{code: 1, err: fmt.Errorf("simulation: %w", err)}
		}
		if moves == nil {
			moves = []sim.PlanMove{}
		}
		sort.SliceStable(moves, func(i, k int) bool { return naturalLess(moves[i].Shard, moves[k].Shard) })
		res.Predicted = append(res.Predicted, predictedJSON{Policy: p.Summary.Policy, Moves: p.Summary.Moves, BytesMoved: p.Summary.BytesMoved,
			FirstWindow: sc.FirstWindow().String(), FirstMoves: moves, FirstBytesMoved: bytes})
	}

	// The tier plans for the changes at t=0.
	start, other := sc.StartChanges()
	for _, e := range other {
		res.NotInPlans = append(res.NotInPlans, fmt.Sprintf("%s at t=0 (no tier plan expresses it; simulated only)", describeEvent(e)))
	}
	if len(spec.Params) > 0 {
		res.NotInPlans = append(res.NotInPlans, fmt.Sprintf("the params of policy %s (a tier's plan builds the policy by name with its defaults)", spec.Name))
	}
	if spec.Integration != sim.Collaborative {
		res.NotInPlans = append(res.NotInPlans, fmt.Sprintf("integration %s of policy %s (a tier plans with the constraints in force)", spec.Integration, spec.Name))
	}
	tierPolicy := func(tier string) string {
		if viaLive {
			return "" // the tier's configured policy
		}
		return spec.TierPolicy(tier)
	}
	drains := map[string][]string{} // instance key → children
	var order []string
	add := func(key, child string) {
		if _, ok := drains[key]; !ok {
			order = append(order, key)
		}
		if !slices.Contains(drains[key], child) {
			drains[key] = append(drains[key], child)
		}
	}
	hostRegion := map[string]string{}
	for _, h := range src.state.Hosts {
		hostRegion[h.Name] = h.Region
	}
	for _, e := range start {
		if e.Kind == sim.EventRegionLoss {
			add("", e.Region)
		} else {
			add(hostRegion[e.Host], e.Host)
		}
	}
	if len(order) == 0 {
		order, drains[""] = []string{""}, nil
	}
	for _, key := range order {
		target, tier := src.global, interfaces.TierGlobal
		if key != "" {
			target, tier = src.regions[key], interfaces.TierRegion
		}
		a, err := conns.client(target.LeaderAddress)
		if err != nil {
			return err
		}
		resp, err := a.Plan(ctx, &wire.AdminPlanRequest{Policy: tierPolicy(tier), DrainChildren: drains[key], Seed: seed})
		if err != nil {
			return remoteCallErr(target.LeaderAddress, err)
		}
		pl := planOutput(target, target.LeaderAddress, resp)
		res.Plans = append(res.Plans, pl)
		res.Agreement = append(res.Agreement, agreement(pl, spec.Name, res.Predicted))
	}

	if err := out.print(g.stdout, res, func(w io.Writer) error { return printScenarioPlan(w, res, src.global.LeaderAddress) }); err != nil {
		return err
	}
	// The report's assertions, versus included (the run's own list has only the
	// per-policy ones).
	return failedAssertions(res.Simulation, "in the simulation (nothing was applied)")
}

func describeEvent(e sim.Event) string {
	switch e.Kind {
	case sim.EventRegionLoss, sim.EventRegionBack:
		return e.Kind + " " + e.Region
	case sim.EventAddHosts:
		return fmt.Sprintf("add_hosts %d in %s", e.Count, e.Region)
	case sim.EventHostSlow:
		return fmt.Sprintf("host_slow %s (speed ×%g)", e.Host, e.Factor)
	}
	return e.Kind + " " + e.Host
}

func printScenarioPlan(w io.Writer, p scenarioPlanJSON, addr string) error {
	fmt.Fprintf(w, "Live state from %s: %d regions, %d hosts, %d shards (%d not on a host; %d with a measured load, the rest declared)\n\n",
		addr, p.Live.Regions, p.Live.Hosts, p.Live.Shards, p.Live.Unplaced, p.Live.Measured)
	if err := sim.WriteTable(w, p.Simulation); err != nil {
		return err
	}
	where := func(region, host string) string {
		switch {
		case host != "":
			return region + "/" + host
		case region != "":
			return region + "/-"
		}
		return "-"
	}
	for _, pr := range p.Predicted {
		fmt.Fprintf(w, "\nPredicted moves, policy %s: %d over the run (%s); by %s: %d shards moved or placed (%s):\n",
			pr.Policy, pr.Moves, formatQuantity(float64(pr.BytesMoved)), pr.FirstWindow, len(pr.FirstMoves), formatQuantity(float64(pr.FirstBytesMoved)))
		if len(pr.FirstMoves) == 0 {
			continue
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "SHARD\tFROM\tTO\tSTATE")
		for _, m := range pr.FirstMoves {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Shard, where(m.FromRegion, m.From), where(m.ToRegion, m.To), formatQuantity(float64(m.StateBytes)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nTier plans for the changes at t=0 (what 'strata plan apply' carries out):\n")
	for i, pl := range p.Plans {
		if err := printPlan(w, pl); err != nil {
			return err
		}
		if i < len(p.Agreement) {
			a := p.Agreement[i]
			fmt.Fprintf(w, "The simulator (policy %s) made %d of these %d moves in its first window (it moved %d shards of %s %s then).\n",
				a.Policy, a.SameInSim, a.PlanMoves, a.SimMoves, a.Tier, a.Instance)
		}
	}
	for _, n := range p.NotInPlans {
		fmt.Fprintf(w, "Not in the tier plans: %s\n", n)
	}
	return nil
}
