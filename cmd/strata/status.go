package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/interfaces"
)

func init() { commands = append(commands, newStatusCmd) }

// statusJSON is the output of "strata status -o json": the tier tree, nested.
type statusJSON struct {
	Addr string `json:"addr"`
	// Tree holds the tier instances the Admin API at Addr answers for (one for a
	// tier daemon); each child that is itself a tier instance nests it.
	Tree []*tierNode `json:"tree"`
	// Unreachable lists the child tier instances that could not be asked.
	Unreachable []string `json:"unreachable,omitempty"`
}

func newStatusCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the tier tree: every tier instance, its leader, its children and their load",
		Long: `Show the tier tree. Starting at the global tier (--addr), every tier instance is
asked for its status, then each of its children that is itself a tier instance
(a region) through the Admin address it registered, down to the hosts.

For each tier instance: its Raft leader, term, applied state index and policy.
For each child, as its parent's leader sees it: state (active, draining,
failed), whether its session is connected, the shards assigned to it, its
utilization per resource in percent (used / capacity; hosts report what they
measure), and how long its lease has left.

A child tier instance that cannot be reached is shown as unreachable (and listed
on standard error); the command still exits 0. Only an unreachable --addr is an
error. -o json prints the same tree as nested objects.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			ctx, conns, done := cf.connect()
			defer done()
			roots, err := walkTree(ctx, conns, cf.addr)
			if err != nil {
				return err
			}
			res := statusJSON{Addr: cf.addr, Tree: roots, Unreachable: unreachable(roots)}
			for _, u := range res.Unreachable {
				fmt.Fprintf(g.stderr, "strata: warning: unreachable tier instance %s\n", u)
			}
			return out.print(g.stdout, res, func(w io.Writer) error { return printStatusTable(w, roots) })
		},
	}
	cf.register(cmd)
	out.register(cmd)
	return cmd
}

// printStatusTable prints the tree as one table; the NAME column is indented by
// depth. A child that is a tier instance shows its leader and term on its row.
func printStatusTable(w io.Writer, roots []*tierNode) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tTIER\tSTATE\tCONN\tSHARDS\tUTILIZATION\tLEASE\tLEADER\tTERM\tINDEX\tPOLICY")
	var row func(n *tierNode, depth int)
	row = func(n *tierNode, depth int) {
		for _, ch := range n.Children {
			indent := strings.Repeat("  ", depth)
			conn := "no"
			if ch.Connected {
				conn = "yes"
			}
			leader, term, index, policy := "-", "-", "-", "-"
			switch {
			case ch.Instance != nil:
				leader, term, index, policy = leaderText(ch.Instance), strconv.FormatUint(ch.Instance.Term, 10), strconv.FormatUint(ch.Instance.StateIndex, 10), ch.Instance.Policy
			case ch.NotFollowed:
				leader = "not followed"
			case ch.Error != "":
				leader = "unreachable"
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", indent, ch.ID, ch.Tier, ch.State, conn, ch.Shards,
				formatUtil(ch.UtilizationPct), formatLease(ch.LeaseRemainingSeconds), leader, term, index, policy)
			if ch.Instance != nil {
				row(ch.Instance, depth+1)
			}
		}
	}
	for _, r := range roots {
		var shards int64
		for _, ch := range r.Children {
			shards += ch.Shards
		}
		fmt.Fprintf(tw, "%s\t%s\t-\t-\t%d\t-\t-\t%s\t%d\t%d\t%s\n", r.Instance, r.Tier, shards, leaderText(r), r.Term, r.StateIndex, r.Policy)
		row(r, 1)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Alerts of every instance, after the table.
	var alert func(n *tierNode)
	alert = func(n *tierNode) {
		for _, a := range n.Alerts {
			fmt.Fprintf(w, "ALERT %s %s: %s\n", n.Tier, n.Instance, a)
		}
		for _, f := range n.Findings {
			fmt.Fprintf(w, "FINDING %s %s: %s\n", n.Tier, n.Instance, f)
		}
		for _, ch := range n.Children {
			if ch.Instance != nil {
				alert(ch.Instance)
			}
		}
	}
	for _, r := range roots {
		alert(r)
	}
	return nil
}

func leaderText(n *tierNode) string {
	switch {
	case n.LeaderID != "" && n.LeaderAddress != "":
		return n.LeaderID + "@" + n.LeaderAddress
	case n.LeaderID != "":
		return n.LeaderID
	case n.LeaderAddress != "":
		return n.LeaderAddress
	}
	return "none"
}

// formatUtil prints utilization percentages, built-in resources first:
// "cpu 12%, mem 40%, tasks 3%".
func formatUtil(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	var keys []string
	for _, r := range interfaces.BuiltinResources {
		if _, ok := m[r]; ok {
			keys = append(keys, r)
		}
	}
	var extra []string
	for k := range m {
		if !slices.Contains(interfaces.BuiltinResources, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	keys = append(keys, extra...)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s%%", k, strconv.FormatFloat(m[k], 'f', -1, 64))
	}
	return strings.Join(parts, ", ")
}

func formatLease(sec float64) string {
	if sec <= 0 {
		return "expired"
	}
	return time.Duration(sec * float64(time.Second)).Round(100 * time.Millisecond).String()
}
