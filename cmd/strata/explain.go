package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func init() { commands = append(commands, newExplainCmd) }

// explainShardJSON is the shard's spec in "explain -o json".
type explainShardJSON struct {
	ID                string                  `json:"id"`
	Job               string                  `json:"job"`
	Load              map[string]float64      `json:"load"`
	InputRate         float64                 `json:"input_rate"`
	StateBytes        int64                   `json:"state_bytes"`
	LatencySLOSeconds float64                 `json:"latency_slo_seconds"`
	Constraints       *explainConstraintsJSON `json:"constraints,omitempty"`
}

// explainConstraintsJSON is the shard's placement rules.
type explainConstraintsJSON struct {
	Pinned       string            `json:"pinned,omitempty"`
	Allowed      []string          `json:"allowed,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	AntiAffinity string            `json:"anti_affinity,omitempty"`
	MaxPerChild  int64             `json:"max_per_child,omitempty"`
}

// explainEventJSON is one committed change of the shard's placement.
type explainEventJSON struct {
	Tier       string  `json:"tier"`
	Instance   string  `json:"instance"`
	StateIndex uint64  `json:"state_index"`
	Mode       string  `json:"mode"`
	From       string  `json:"from,omitempty"`
	To         string  `json:"to,omitempty"`
	Epoch      uint64  `json:"epoch"`
	Goal       string  `json:"goal,omitempty"`
	Delta      float64 `json:"delta"`
	Reason     string  `json:"reason"`
	At         string  `json:"at,omitempty"` // RFC 3339, UTC: when the leader appended the change
	// Former is set on the events of a tier instance that no longer holds the shard.
	Former bool `json:"former,omitempty"`
}

// explainJSON is the output of "strata explain".
type explainJSON struct {
	ShardID string `json:"shard_id"`
	// Shard is the spec; absent when the cluster keeps only the shard's history
	// (e.g. its job was deleted).
	Shard *explainShardJSON `json:"shard,omitempty"`
	// Placement is where the shard is now, top tier down.
	Placement []placementJSON `json:"placement"`
	// History is grouped by tier instance: the global tier, then each instance
	// now on the shard's path, then those that held it before; oldest first
	// within each.
	History []explainEventJSON `json:"history"`
	// Quarantined lists the tier instances that quarantined the shard (the
	// doctor control policy), with the reason.
	Quarantined []quarantineJSON `json:"quarantined,omitempty"`
	// Findings are the control policies' last findings about the shard or its
	// job, per tier instance ("tier/instance: policy: diagnosis: evidence → action").
	Findings []string `json:"findings,omitempty"`
	// Warnings name the tier instances that could not be asked.
	Warnings []string `json:"warnings,omitempty"`
}

// quarantineJSON is where and why a shard is quarantined.
type quarantineJSON struct {
	Tier     string `json:"tier"`
	Instance string `json:"instance"`
	Reason   string `json:"reason"`
}

func newExplainCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var limit int64
	cmd := &cobra.Command{
		Use:   "explain SHARD",
		Short: "Show where a shard is at each tier and why it moved",
		Long: `Show a shard's spec, its placement at each tier (the region the global tier gave
it, the host that region gave it, with epochs) and the history of its placement:
first the global tier's, then that of the region holding it now, then that of
each region that held it before (the global history names them). Every event
has the Raft state index that committed it, when the leader appended that entry
(UTC; "-" for changes recorded before this was kept), its mode (assign, move, begin,
complete, abort, unassign, quarantine, release), the epoch it left, the goal
and the reason. A shard a tier instance quarantined (the doctor control
policy: it failed on several hosts) is shown with the reason, and the control
policies' current findings about the shard or its job (a straggler host, a
failing shard, the autoscale advice) are listed.

An unknown shard is an error (exit code 1).`,
		Example: `  strata explain wordcount/3
  strata explain wordcount/3 --limit 5 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			if err := interfaces.ValidateID("SHARD", args[0]); err != nil {
				return usageErr(err)
			}
			if limit < 0 {
				return usageErr(fmt.Errorf("--limit: must be ≥ 0 (got %d): %w", limit, interfaces.ErrInvalid))
			}
			ctx, conns, done := cf.connect()
			defer done()
			res, err := explainShard(ctx, conns, cf.addr, args[0], limit)
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(g.stderr, "strata: warning: %s\n", w)
			}
			return out.print(g.stdout, res, func(w io.Writer) error { return printExplain(w, res) })
		},
	}
	cf.register(cmd)
	out.register(cmd)
	cmd.Flags().Int64Var(&limit, "limit", 0, "at most this many most recent events per tier instance (0: all)")
	return cmd
}

// explainShard asks the root tier instance, then each tier instance on the
// shard's path, then the former owners the histories name, for the shard.
func explainShard(ctx context.Context, conns *adminConns, addr, shard string, limit int64) (*explainJSON, error) {
	roots, err := walkTree(ctx, conns, addr)
	if err != nil {
		return nil, err
	}
	res := &explainJSON{ShardID: shard, Placement: []placementJSON{}, History: []explainEventJSON{}}
	asked := map[*tierNode]bool{}
	ask := func(n *tierNode) (*wire.ExplainResponse, error) {
		asked[n] = true
		c, err := conns.client(n.Address)
		if err != nil {
			return nil, err
		}
		resp, err := c.Explain(ctx, &wire.ExplainRequest{Shard: shard, Limit: limit})
		if err == nil {
			if q := resp.GetQuarantined(); q != "" {
				res.Quarantined = append(res.Quarantined, quarantineJSON{Tier: n.Tier, Instance: n.Instance, Reason: q})
			}
			for _, f := range resp.GetFindings() {
				res.Findings = append(res.Findings, n.Tier+"/"+n.Instance+": "+f)
			}
		}
		return resp, err
	}
	addHistory := func(resp *wire.ExplainResponse, former bool) {
		for _, e := range resp.GetHistory() {
			ev := explainEventJSON{
				Tier: e.GetTier(), Instance: e.GetInstance(), StateIndex: e.GetStateIndex(), Mode: e.GetMode(),
				From: e.GetMove().GetFrom(), To: e.GetMove().GetTo(), Epoch: e.GetMove().GetEpoch(),
				Goal: e.GetMove().GetGoal(), Delta: e.GetMove().GetDelta(), Reason: e.GetMove().GetReason(), Former: former,
			}
			if t := e.GetAtUnixNanos(); t != 0 {
				ev.At = time.Unix(0, t).UTC().Format(time.RFC3339Nano)
			}
			res.History = append(res.History, ev)
		}
	}

	// The root answers first; an unknown shard there is the command's error.
	var root *tierNode
	var rootResp *wire.ExplainResponse
	var rootErr error
	for _, r := range roots {
		resp, err := ask(r)
		if err == nil {
			root, rootResp = r, resp
			break
		}
		rootErr = remoteCallErr(r.Address, err)
	}
	if root == nil {
		return nil, rootErr
	}
	if s := rootResp.GetShard(); s != nil {
		res.Shard = shardSpecJSON(s)
	}
	addHistory(rootResp, false)

	// Follow the current placement down the tree.
	type level struct {
		node *tierNode
		resp *wire.ExplainResponse
	}
	path := []level{{root, rootResp}}
	for cur := path[0]; ; {
		if len(cur.resp.GetPlacement()) == 0 {
			break
		}
		p := cur.resp.GetPlacement()[0]
		res.Placement = append(res.Placement, placementFromWire(p))
		ch := cur.node.FindChild(p.GetChild())
		if ch == nil || ch.Instance == nil {
			if ch != nil && ch.Error != "" {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s (child of %s/%s): %s", ch.ID, cur.node.Tier, cur.node.Instance, ch.Error))
			}
			break
		}
		resp, err := ask(ch.Instance)
		if err != nil {
			if !errors.Is(wire.FromStatus(err), interfaces.ErrNotFound) {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s/%s: %v", ch.Instance.Tier, ch.Instance.Instance, remoteCallErr(ch.Instance.Address, err)))
			}
			// Not found: the move to it has not reached it yet.
			break
		}
		if res.Shard == nil && resp.GetShard() != nil {
			res.Shard = shardSpecJSON(resp.GetShard())
		}
		addHistory(resp, false)
		cur = level{ch.Instance, resp}
		path = append(path, cur)
	}

	// Former owners: tier instances named by the histories of the levels above
	// that are no longer on the path.
	for i := 0; i < len(path); i++ {
		lv := path[i]
		for _, e := range lv.resp.GetHistory() {
			for _, id := range []string{e.GetMove().GetFrom(), e.GetMove().GetTo()} {
				ch := lv.node.FindChild(id)
				if id == "" || ch == nil || ch.Instance == nil || asked[ch.Instance] {
					continue
				}
				resp, err := ask(ch.Instance)
				if err != nil {
					if !errors.Is(wire.FromStatus(err), interfaces.ErrNotFound) {
						res.Warnings = append(res.Warnings, fmt.Sprintf("%s/%s: %v", ch.Instance.Tier, ch.Instance.Instance, remoteCallErr(ch.Instance.Address, err)))
					}
					continue
				}
				addHistory(resp, true)
			}
		}
	}
	return res, nil
}

func shardSpecJSON(s *wire.Shard) *explainShardJSON {
	out := &explainShardJSON{
		ID: s.GetId(), Job: s.GetJob(), Load: map[string]float64{}, InputRate: s.GetInputRate(),
		StateBytes: s.GetStateBytes(), LatencySLOSeconds: time.Duration(s.GetLatencySloNanos()).Seconds(),
	}
	for _, r := range interfaces.BuiltinResources {
		if v := wireLoadGet(s.GetLoad(), r); v != 0 {
			out.Load[r] = v
		}
	}
	for k, v := range s.GetLoad().GetExtra() {
		out.Load[k] = v
	}
	if c := s.GetConstraints(); c != nil && (c.GetPinned() != "" || len(c.GetAllowed()) > 0 || len(c.GetLabels()) > 0 || c.GetAntiAffinity() != "" || c.GetMaxPerChild() != 0) {
		out.Constraints = &explainConstraintsJSON{Pinned: c.GetPinned(), Allowed: c.GetAllowed(), Labels: c.GetLabels(), AntiAffinity: c.GetAntiAffinity(), MaxPerChild: c.GetMaxPerChild()}
	}
	return out
}

func printExplain(w io.Writer, res *explainJSON) error {
	if res.Shard == nil {
		fmt.Fprintf(w, "shard %s: no longer in the cluster; its history remains\n", res.ShardID)
	}
	if s := res.Shard; s != nil {
		fmt.Fprintf(w, "shard %s (job %s)\n", s.ID, s.Job)
		l := &wire.Load{Cpu: s.Load[interfaces.CPU], Mem: s.Load[interfaces.Mem], Net: s.Load[interfaces.Net], Tasks: s.Load[interfaces.Tasks], Extra: map[string]float64{}}
		for k, v := range s.Load {
			if !slices.Contains(interfaces.BuiltinResources, k) {
				l.Extra[k] = v
			}
		}
		slo := "none"
		if s.LatencySLOSeconds > 0 {
			slo = time.Duration(s.LatencySLOSeconds * float64(time.Second)).String()
		}
		fmt.Fprintf(w, "  load %s; input %s rec/s; state %sB; latency SLO %s\n", formatLoad(l),
			strconv.FormatFloat(s.InputRate, 'g', 6, 64), formatQuantity(float64(s.StateBytes)), slo)
	}
	fmt.Fprintln(w, "\nPLACEMENT (top tier down)")
	if len(res.Placement) == 0 {
		fmt.Fprintln(w, "  not placed")
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "  TIER\tINSTANCE\tCHILD\tEPOCH\tIN FLIGHT")
		for _, p := range res.Placement {
			inflight := "no"
			if p.InFlight {
				inflight = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", p.Tier, p.Instance, p.Child, p.Epoch, inflight)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, q := range res.Quarantined {
		fmt.Fprintf(w, "\nQUARANTINED at %s/%s (not placed until released: strata shards release %s)\n  %s\n", q.Tier, q.Instance, res.ShardID, q.Reason)
	}
	if len(res.Findings) > 0 {
		fmt.Fprintln(w, "\nFINDINGS (control policies, last round)")
		for _, f := range res.Findings {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	fmt.Fprintln(w, "\nHISTORY (per tier instance, oldest first)")
	if len(res.History) == 0 {
		_, err := fmt.Fprintln(w, "  no placement changes recorded")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  TIER/INSTANCE\tINDEX\tTIME (UTC)\tMODE\tFROM\tTO\tEPOCH\tGOAL\tDELTA\tREASON")
	for _, e := range res.History {
		who := e.Tier + "/" + e.Instance
		if e.Former {
			who += " (former)"
		}
		when := "-"
		if at, err := time.Parse(time.RFC3339Nano, e.At); err == nil {
			when = at.UTC().Format("2006-01-02 15:04:05.000")
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", who, e.StateIndex, when, e.Mode, orDash(e.From), orDash(e.To), e.Epoch,
			orDash(e.Goal), strconv.FormatFloat(e.Delta, 'g', 4, 64), orDash(e.Reason))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
