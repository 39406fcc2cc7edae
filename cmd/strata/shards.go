package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func init() { commands = append(commands, newShardsCmd) }

// Shard states in the output of "strata shards".
const (
	shardPlaced   = "placed"    // owned at every tier down to a host
	shardInFlight = "in-flight" // a move is decided at some tier but has not landed
	shardPending  = "pending"   // some tier has not placed it yet
	shardUnknown  = "unknown"   // a tier instance on its path could not be asked
	// shardQuarantined: a tier instance quarantined it (the doctor control
	// policy); it is not placed until released.
	shardQuarantined = "quarantined"
)

// placementJSON is one level of a shard's placement path.
type placementJSON struct {
	Tier     string `json:"tier"`
	Instance string `json:"instance"`
	Child    string `json:"child"`
	Epoch    uint64 `json:"epoch"`
	InFlight bool   `json:"in_flight,omitempty"`
}

// shardRowJSON is one shard of "strata shards -o json".
type shardRowJSON struct {
	Shard     string          `json:"shard"`
	Job       string          `json:"job"`
	Placement []placementJSON `json:"placement"`
	State     string          `json:"state"`
	// Host is the last child of the path when it is not a tier instance.
	Host string `json:"host,omitempty"`
	// Quarantined says where and why it is quarantined ("region/eu-1: doctor: …").
	Quarantined string `json:"quarantined,omitempty"`
}

func placementFromWire(p *wire.Placement) placementJSON {
	return placementJSON{Tier: p.GetTier(), Instance: p.GetInstance(), Child: p.GetChild(), Epoch: p.GetEpoch(), InFlight: p.GetInFlight()}
}

func newShardsCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var job string
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "List shards with their placement path: region, host, epochs",
		Long: `List the shards of every job (or of --job) with their full placement path. The
global tier (--addr) says which region owns each shard; each region, found
through the global tier's status, says which of its hosts does.

Columns: SHARD, JOB, one column per tier below the global one (REGION, HOST),
EPOCHS (the fencing epoch at each tier, top down), and STATE:
  placed     owned at every tier down to a host
  in-flight  a move is decided but has not landed (the target is marked *)
  pending    not placed yet at some tier
  unknown    a region on the path could not be asked (see standard error)
  quarantined  a tier instance quarantined it (it failed on several hosts:
             the doctor control policy); the reason follows the table.
             'strata shards release SHARD' lets it be placed again.
An unknown --job is an error (exit code 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			if cmd.Flags().Changed("job") {
				if err := interfaces.ValidateID("--job", job); err != nil {
					return usageErr(err)
				}
			}
			ctx, conns, done := cf.connect()
			defer done()
			rows, levels, warnings, err := collectShards(ctx, conns, cf.addr, job)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintf(g.stderr, "strata: warning: %s\n", w)
			}
			return out.print(g.stdout, rows, func(w io.Writer) error { return printShardsTable(w, rows, levels) })
		},
	}
	cf.register(cmd)
	out.register(cmd)
	cmd.Flags().StringVar(&job, "job", "", "only the shards of this job")
	cmd.AddCommand(newShardsReleaseCmd(g))
	return cmd
}

// newShardsReleaseCmd is "strata shards release SHARD": find the tier instance
// that quarantined the shard and release it there.
func newShardsReleaseCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var reason string
	cmd := &cobra.Command{
		Use:   "release SHARD",
		Short: "Release a quarantined shard so that it is placed again",
		Long: `Release a shard that a tier instance quarantined (the doctor control policy
quarantines a shard that failed on several hosts within its window). The tier
tree is walked from --addr to find the instance holding the quarantine; the
release is committed there with --reason and shows in 'strata explain'. A shard
that is not quarantined anywhere is an error (exit code 1).`,
		Example: `  strata shards release wordcount/3 --reason "fixed the worker image"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.check(); err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := interfaces.ValidateID("SHARD", args[0]); err != nil {
				return usageErr(err)
			}
			ctx, conns, done := cf.connect()
			defer done()
			roots, err := walkTree(ctx, conns, cf.addr)
			if err != nil {
				return err
			}
			res := releaseJSON{Shard: args[0]}
			// Instances that could not say: the tree walk's unreachable
			// children first, then those whose Explain failed. Every instance
			// is asked, whatever failed before: a release committed at one is
			// reported even when another's fails.
			unasked := unreachable(roots)
			eachInstance(roots, func(n *tierNode, _ *childNode) {
				c, err := conns.client(n.Address)
				if err != nil {
					unasked = append(unasked, fmt.Sprintf("%s/%s at %s: %v", n.Tier, n.Instance, n.Address, err))
					return
				}
				resp, err := c.Explain(ctx, &wire.ExplainRequest{Shard: args[0], Limit: 1})
				if err != nil && !errors.Is(wire.FromStatus(err), interfaces.ErrNotFound) {
					unasked = append(unasked, remoteCallErr(n.Address, err).Error())
					return
				}
				if err != nil || resp.GetQuarantined() == "" {
					return // not known or not quarantined here
				}
				r, err := c.ReleaseShard(ctx, &wire.ReleaseShardRequest{Shard: args[0], Reason: reason})
				if err != nil {
					res.Failed = append(res.Failed, fmt.Sprintf("%s/%s: %v", n.Tier, n.Instance, remoteCallErr(n.Address, err)))
					return
				}
				res.Released = append(res.Released, releasedJSON{Tier: r.GetTier(), Instance: r.GetInstance(), StateIndex: r.GetStateIndex(), Quarantined: resp.GetQuarantined()})
			})
			released := len(res.Released)
			if released == 0 && len(res.Failed) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("shard %s: no release succeeded:\n  %s", args[0], strings.Join(res.Failed, "\n  "))}
			}
			if released == 0 && len(unasked) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("shard %s is not quarantined at any tier instance that answered; %d could not be asked:\n  %s", args[0], len(unasked), strings.Join(unasked, "\n  "))}
			}
			if released == 0 {
				return &exitError{code: 1, err: fmt.Errorf("shard %s is not quarantined at any tier instance: %w", args[0], interfaces.ErrNotFound)}
			}
			for _, w := range unasked {
				fmt.Fprintf(g.stderr, "strata: warning: could not ask %s\n", w)
			}
			res.Unasked = unasked
			if err := out.print(g.stdout, res, func(w io.Writer) error {
				for _, r := range res.Released {
					fmt.Fprintf(w, "released %s at %s/%s (state index %d); it was quarantined: %s\n", res.Shard, r.Tier, r.Instance, r.StateIndex, r.Quarantined)
				}
				return nil
			}); err != nil {
				return err
			}
			if len(res.Failed) > 0 {
				// Some released, some not: say which failed, and exit 1.
				return &exitError{code: 1, err: fmt.Errorf("shard %s: %d release(s) failed:\n  %s", args[0], len(res.Failed), strings.Join(res.Failed, "\n  "))}
			}
			return nil
		},
	}
	cf.register(cmd)
	out.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why it is released (recorded in the placement history)")
	return cmd
}

// collectShards builds every shard's placement path: the root's ListShards, then
// the ListShards of each child tier instance, followed down the tree. levels
// names the tier of the children at each depth (for the table header).
func collectShards(ctx context.Context, conns *adminConns, addr, job string) (rows []shardRowJSON, levels []string, warnings []string, err error) {
	roots, err := walkTree(ctx, conns, addr)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, u := range unreachable(roots) {
		warnings = append(warnings, "unreachable tier instance "+u)
	}
	// placements[n][shard] is the placement of shard at tier instance n.
	placements := map[*tierNode]map[string]*wire.Placement{}
	quarantined := map[*tierNode]map[string]string{}
	failed := map[*tierNode]bool{}
	var rootShards []*wire.ShardInfo
	var listErr error
	eachInstance(roots, func(n *tierNode, via *childNode) {
		if listErr != nil {
			return
		}
		c, err := conns.client(n.Address)
		if err == nil {
			var resp *wire.ListShardsResponse
			resp, err = c.ListShards(ctx, &wire.ListShardsRequest{Job: job})
			if err == nil {
				m := map[string]*wire.Placement{}
				for _, s := range resp.GetShards() {
					if len(s.GetPlacement()) > 0 {
						m[s.GetShard().GetId()] = s.GetPlacement()[0]
					}
					if q := s.GetQuarantined(); q != "" {
						if quarantined[n] == nil {
							quarantined[n] = map[string]string{}
						}
						quarantined[n][s.GetShard().GetId()] = q
					}
				}
				placements[n] = m
				if via == nil {
					rootShards = append(rootShards, resp.GetShards()...)
				}
				return
			}
		}
		if via == nil {
			listErr = remoteCallErr(n.Address, err)
			return
		}
		failed[n] = true
		warnings = append(warnings, fmt.Sprintf("%s/%s at %s: %v", n.Tier, n.Instance, n.Address, remoteCallErr(n.Address, err)))
	})
	if listErr != nil {
		return nil, nil, nil, listErr
	}
	for _, s := range rootShards {
		id := s.GetShard().GetId()
		row := shardRowJSON{Shard: id, Job: s.GetShard().GetJob(), Placement: []placementJSON{}, State: shardPlaced}
		var node *tierNode
		for _, r := range roots {
			if _, ok := placements[r][id]; ok {
				node = r
			}
		}
		if node == nil {
			row.State = shardPending
			for _, r := range roots {
				if q, ok := quarantined[r][id]; ok {
					row.State, row.Quarantined = shardQuarantined, r.Tier+"/"+r.Instance+": "+q
				}
			}
		}
		for depth := 0; node != nil; depth++ {
			if failed[node] {
				row.State = shardUnknown
				break
			}
			p, ok := placements[node][id]
			if !ok {
				row.State = shardPending
				if q, ok := quarantined[node][id]; ok {
					row.State, row.Quarantined = shardQuarantined, node.Tier+"/"+node.Instance+": "+q
				}
				break
			}
			row.Placement = append(row.Placement, placementFromWire(p))
			ch := node.FindChild(p.GetChild())
			for len(levels) <= depth {
				levels = append(levels, "")
			}
			if ch != nil && levels[depth] == "" {
				levels[depth] = ch.Tier
			}
			if p.GetInFlight() {
				// The target is told only once the move commits: the path
				// ends here for now.
				row.State = shardInFlight
				break
			}
			if ch == nil || ch.Instance == nil {
				if ch != nil && ch.Error != "" {
					row.State = shardUnknown
				} else {
					row.Host = p.GetChild()
				}
				break
			}
			node = ch.Instance
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, k int) bool {
		if rows[i].Job != rows[k].Job {
			return naturalLess(rows[i].Job, rows[k].Job)
		}
		return naturalLess(rows[i].Shard, rows[k].Shard)
	})
	if rows == nil {
		rows = []shardRowJSON{}
	}
	return rows, levels, warnings, nil
}

func printShardsTable(w io.Writer, rows []shardRowJSON, levels []string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no shards")
		return err
	}
	if len(levels) == 0 {
		levels = []string{interfaces.TierRegion, interfaces.TierHost}
	}
	tw := newTable(w)
	head := []string{"SHARD", "JOB"}
	for i, l := range levels {
		if l == "" {
			l = "level " + strconv.Itoa(i+1)
		}
		head = append(head, strings.ToUpper(l))
	}
	fmt.Fprintln(tw, strings.Join(append(head, "EPOCHS", "STATE"), "\t"))
	count := map[string]int{}
	for _, r := range rows {
		cols := []string{r.Shard, r.Job}
		var epochs []string
		for i := range levels {
			if i < len(r.Placement) {
				p := r.Placement[i]
				c := p.Child
				if p.InFlight {
					c += "*"
				}
				cols = append(cols, c)
				epochs = append(epochs, strconv.FormatUint(p.Epoch, 10))
			} else {
				cols = append(cols, "-")
			}
		}
		e := strings.Join(epochs, "/")
		if e == "" {
			e = "-"
		}
		cols = append(cols, e, r.State)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		count[r.State]++
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	q := ""
	if n := count[shardQuarantined]; n > 0 {
		q = fmt.Sprintf(", %d quarantined", n)
	}
	if _, err := fmt.Fprintf(w, "%d shards: %d placed, %d in flight, %d pending, %d unknown%s\n",
		len(rows), count[shardPlaced], count[shardInFlight], count[shardPending], count[shardUnknown], q); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Quarantined != "" {
			if _, err := fmt.Fprintf(w, "QUARANTINED %s at %s\n", r.Shard, r.Quarantined); err != nil {
				return err
			}
		}
	}
	return nil
}

// releaseJSON is the -o json output of "strata shards release".
type releaseJSON struct {
	Shard    string         `json:"shard"`
	Released []releasedJSON `json:"released"`
	// Unasked lists the tier instances that could not be asked.
	Unasked []string `json:"unasked,omitempty"`
	// Failed lists the releases that failed (tier/instance: error).
	Failed []string `json:"failed,omitempty"`
}

type releasedJSON struct {
	Tier        string `json:"tier"`
	Instance    string `json:"instance"`
	StateIndex  uint64 `json:"state_index"`
	Quarantined string `json:"quarantined"`
}
