package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/adminview"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// "strata host" is also the host daemon ("strata host --config FILE", in
// daemons.go). Cobra routes "host drain"/"host undrain" to subcommands and
// "host --config" to the daemon only when they are one command, so the daemon
// commands add drain and undrain to themselves (addDrainCommands):
// "strata host" for hosts, "strata region" for regions and "strata tier" for a
// child of any tier. TestHostCommandIsOne checks the result for hosts.

// addDrainCommands adds "drain" and "undrain" of a child of tier (any tier
// when tier is "") to a daemon command.
func addDrainCommands(g *globalOptions, cmd *cobra.Command, tier string) {
	cmd.AddCommand(newChildStateCmd(g, tier, true), newChildStateCmd(g, tier, false))
}

// childStateJSON is the output of "host|region|tier drain" and "… undrain".
type childStateJSON struct {
	Child string `json:"child"`
	// Host repeats Child for "host drain|undrain" (its output named it so).
	Host     string `json:"host,omitempty"`
	Tier     string `json:"tier"`
	Instance string `json:"instance"`
	State    string `json:"state"`
	// ShardsToMove is the number of shards the child held when drained.
	ShardsToMove int64  `json:"shards_to_move,omitempty"`
	StateIndex   uint64 `json:"state_index"`
	// Waited is set with --wait: the child held no shards when the command ended.
	Waited bool `json:"waited,omitempty"`
}

var childNoun = adminview.ChildNoun

func newChildStateCmd(g *globalOptions, tier string, drain bool) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var wait time.Duration
	noun := childNoun(tier)
	arg := strings.ToUpper(noun)
	whose := map[string]string{
		interfaces.TierHost:   "its region (or other parent tier)",
		interfaces.TierRegion: "the global tier",
	}[tier]
	if whose == "" {
		whose = "its parent tier instance"
	}
	use, short, long := "undrain "+arg, "Make a draining "+noun+" take shards again",
		`Make a draining `+noun+` active again: `+whose+` gives it new shards from the
next round. A failed `+noun+` cannot be undrained; it becomes active when it
reconnects.`
	if drain {
		use, short, long = "drain "+arg, "Drain a "+noun+": move its shards away and give it no new ones",
			`Drain a `+noun+`: `+whose+` marks it draining, gives it no new shards and
moves its shards to its other children over the next rounds. With --wait the
command then waits until the `+noun+` holds no shards (exit code 1 if it still
does when --wait runs out).`
	}
	where := arg + ` is a child of tier "` + tier + `" somewhere in the tree.`
	if tier == "" {
		where = arg + ` is a child of any tier instance in the tree (a region, a host, a rack of a custom tier).`
	}
	if tier == interfaces.TierRegion {
		long += `

Applying the token of "strata plan --fail REGION" drains the region the same
way; "strata region undrain REGION" undoes it.`
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: long + `

` + where + ` An unknown ` + noun + ` is an error that names it (exit code 1).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			child := args[0]
			if err := interfaces.ValidateID(arg, child); err != nil {
				return usageErr(err)
			}
			if wait < 0 {
				return usageErr(fmt.Errorf("--wait: must be ≥ 0 (got %v): %w", wait, interfaces.ErrInvalid))
			}
			ctx, conns, done := cf.connect()
			defer done()
			roots, err := walkTree(ctx, conns, cf.addr)
			if err != nil {
				return err
			}
			parent, err := findChildParent(roots, child, tier)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			c, err := conns.client(parent.Address)
			if err != nil {
				return err
			}
			res := childStateJSON{Child: child, Tier: parent.Tier, Instance: parent.Instance}
			if tier == interfaces.TierHost {
				res.Host = child
			}
			if drain {
				resp, err := c.Drain(ctx, &wire.DrainRequest{Tier: parent.Tier, Instance: parent.Instance, Child: child})
				if err != nil {
					return remoteCallErr(parent.Address, err)
				}
				res.State, res.ShardsToMove, res.StateIndex = childStateName(resp.GetState()), resp.GetShardsToMove(), resp.GetStateIndex()
			} else {
				resp, err := c.Undrain(ctx, &wire.UndrainRequest{Tier: parent.Tier, Instance: parent.Instance, Child: child})
				if err != nil {
					return remoteCallErr(parent.Address, err)
				}
				res.State, res.StateIndex = childStateName(resp.GetState()), resp.GetStateIndex()
			}
			var waitErr error
			if drain && wait > 0 {
				waitErr = waitChildEmpty(conns, parent.Address, noun, child, wait)
				res.Waited = waitErr == nil
			}
			if err := out.print(g.stdout, res, func(w io.Writer) error {
				fmt.Fprintf(w, "%s %s (child of %s/%s) is %s", noun, res.Child, res.Tier, res.Instance, res.State)
				if drain {
					fmt.Fprintf(w, ": %d shards to move", res.ShardsToMove)
				}
				fmt.Fprintf(w, ", committed at state index %d\n", res.StateIndex)
				if res.Waited {
					fmt.Fprintf(w, "%s %s holds no shards\n", noun, res.Child)
				}
				return nil
			}); err != nil {
				return err
			}
			return waitErr
		},
	}
	cf.register(cmd)
	out.register(cmd)
	if drain {
		cmd.Flags().DurationVar(&wait, "wait", 0, "after draining, wait up to this long until the "+noun+" holds no shards (0: do not wait)")
	}
	return cmd
}

// findHostParent returns the tier instance that has host as a child of tier
// "host" (findChildParent).
func findHostParent(roots []*tierNode, host string) (*tierNode, error) {
	return findChildParent(roots, host, interfaces.TierHost)
}

// findChildParent returns the tier instance that has id as a child of tier
// (adminview.FindParent).
var findChildParent = adminview.FindParent

// waitChildEmpty polls the status of the instance at addr until its child
// (a noun: host, region, …) holds no shards, for up to wait.
func waitChildEmpty(conns *adminConns, addr, noun, host string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := int64(-1)
	for {
		c, err := conns.client(addr)
		if err != nil {
			return err
		}
		callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.Status(callCtx, &wire.StatusRequest{})
		callCancel()
		if err == nil {
			for _, ts := range resp.GetTiers() {
				for _, is := range ts.GetInstances() {
					for _, cs := range is.GetChildren() {
						if cs.GetChild().GetId() == host {
							last = cs.GetShards()
						}
					}
				}
			}
			if last == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			// A call cut short by --wait itself is not the cluster's failure.
			if err != nil && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
				return remoteCallErr(addr, err)
			}
			if last < 0 {
				return &exitError{code: 1, err: fmt.Errorf("%s %q: no status of its shards arrived within --wait %v", noun, host, wait)}
			}
			return &exitError{code: 1, err: fmt.Errorf("%s %q still holds %d shards after --wait %v", noun, host, last, wait)}
		case <-tick.C:
		}
	}
}
