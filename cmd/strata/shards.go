package main

import (
	"context"
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
An unknown --job is an error (exit code 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			if job != "" {
				if err := interfaces.ValidateID("--job", job); err != nil {
					return usageErr(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
			defer cancel()
			conns := newAdminConns()
			defer conns.close()
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
		}
		for depth := 0; node != nil; depth++ {
			if failed[node] {
				row.State = shardUnknown
				break
			}
			p, ok := placements[node][id]
			if !ok {
				row.State = shardPending
				break
			}
			row.Placement = append(row.Placement, placementFromWire(p))
			ch := node.findChild(p.GetChild())
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
	_, err := fmt.Fprintf(w, "%d shards: %d placed, %d in flight, %d pending, %d unknown\n",
		len(rows), count[shardPlaced], count[shardInFlight], count[shardPending], count[shardUnknown])
	return err
}
