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

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// "strata host" is also the host daemon ("strata host --config FILE", in
// daemons.go). Cobra routes "host drain"/"host undrain" to subcommands and
// "host --config" to the daemon only when they are one command, so init adds
// drain and undrain to an already registered "host" command (files initialise
// in name order: daemons.go before host.go) and registers a "host" of its own
// only when there is none. TestHostCommandIsOne checks the result.
// addHostAdminCommands adds "drain" and "undrain" to a "host" command.
func addHostAdminCommands(g *globalOptions, host *cobra.Command) {
	host.AddCommand(newHostStateCmd(g, true), newHostStateCmd(g, false))
}

// hostStateJSON is the output of "host drain" and "host undrain".
type hostStateJSON struct {
	Host     string `json:"host"`
	Tier     string `json:"tier"`
	Instance string `json:"instance"`
	State    string `json:"state"`
	// ShardsToMove is the number of shards the host held when drained.
	ShardsToMove int64  `json:"shards_to_move,omitempty"`
	StateIndex   uint64 `json:"state_index"`
	// Waited is set with --wait: the host held no shards when the command ended.
	Waited bool `json:"waited,omitempty"`
}

func newHostStateCmd(g *globalOptions, drain bool) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var wait time.Duration
	use, short, long := "undrain HOST", "Make a draining host take shards again",
		`Make a draining host active again: it takes new shards from the next round.
A failed host cannot be undrained; it becomes active when it reconnects.`
	if drain {
		use, short, long = "drain HOST", "Drain a host: move its shards away and give it no new ones",
			`Drain a host: its region marks it draining, gives it no new shards and moves
its shards to other hosts over the next rounds. With --wait the command then
waits until the host holds no shards (exit code 1 if it still does when --wait
runs out).`
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: long + `

HOST is a child of tier "host" somewhere in the tree. An unknown host is an
error that names it (exit code 1).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			host := args[0]
			if err := interfaces.ValidateID("HOST", host); err != nil {
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
			parent, err := findHostParent(roots, host)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			c, err := conns.client(parent.Address)
			if err != nil {
				return err
			}
			res := hostStateJSON{Host: host, Tier: parent.Tier, Instance: parent.Instance}
			if drain {
				resp, err := c.Drain(ctx, &wire.DrainRequest{Tier: parent.Tier, Instance: parent.Instance, Child: host})
				if err != nil {
					return remoteCallErr(parent.Address, err)
				}
				res.State, res.ShardsToMove, res.StateIndex = childStateName(resp.GetState()), resp.GetShardsToMove(), resp.GetStateIndex()
			} else {
				resp, err := c.Undrain(ctx, &wire.UndrainRequest{Tier: parent.Tier, Instance: parent.Instance, Child: host})
				if err != nil {
					return remoteCallErr(parent.Address, err)
				}
				res.State, res.StateIndex = childStateName(resp.GetState()), resp.GetStateIndex()
			}
			var waitErr error
			if drain && wait > 0 {
				waitErr = waitHostEmpty(conns, parent.Address, host, wait)
				res.Waited = waitErr == nil
			}
			if err := out.print(g.stdout, res, func(w io.Writer) error {
				fmt.Fprintf(w, "host %s (child of %s/%s) is %s", res.Host, res.Tier, res.Instance, res.State)
				if drain {
					fmt.Fprintf(w, ": %d shards to move", res.ShardsToMove)
				}
				fmt.Fprintf(w, ", committed at state index %d\n", res.StateIndex)
				if res.Waited {
					fmt.Fprintf(w, "host %s holds no shards\n", res.Host)
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
		cmd.Flags().DurationVar(&wait, "wait", 0, "after draining, wait up to this long until the host holds no shards (0: do not wait)")
	}
	return cmd
}

// findHostParent returns the tier instance that has host as a child of tier
// "host". Not found is an ErrNotFound naming the host; a name that is a child
// of another tier, or that more than one instance has, is ErrInvalid.
func findHostParent(roots []*tierNode, host string) (*tierNode, error) {
	var parents []*tierNode
	var otherTier []string
	searched := 0
	eachInstance(roots, func(n *tierNode, _ *childNode) {
		searched++
		if ch := n.findChild(host); ch != nil {
			if ch.Tier == interfaces.TierHost {
				parents = append(parents, n)
			} else {
				otherTier = append(otherTier, fmt.Sprintf("a %s child of %s/%s", ch.Tier, n.Tier, n.Instance))
			}
		}
	})
	switch {
	case len(parents) == 1:
		return parents[0], nil
	case len(parents) > 1:
		var names []string
		for _, p := range parents {
			names = append(names, p.Tier+"/"+p.Instance)
		}
		return nil, fmt.Errorf("host %q is a child of %d tier instances (%s); refusing to guess: %w", host, len(parents), strings.Join(names, ", "), interfaces.ErrInvalid)
	case len(otherTier) > 0:
		return nil, fmt.Errorf("%q is not a host: it is %s: %w", host, strings.Join(otherTier, " and "), interfaces.ErrInvalid)
	}
	msg := fmt.Sprintf("host %q: no tier instance has it as a child (searched %d instances)", host, searched)
	if u := unreachable(roots); len(u) > 0 {
		msg += "; it may be under an unreachable one: " + strings.Join(u, "; ")
	}
	return nil, fmt.Errorf("%s: %w", msg, interfaces.ErrNotFound)
}

// waitHostEmpty polls the status of the instance at addr until host holds no
// shards, for up to wait.
func waitHostEmpty(conns *adminConns, addr, host string, wait time.Duration) error {
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
				return &exitError{code: 1, err: fmt.Errorf("host %q: no status of its shards arrived within --wait %v", host, wait)}
			}
			return &exitError{code: 1, err: fmt.Errorf("host %q still holds %d shards after --wait %v", host, last, wait)}
		case <-tick.C:
		}
	}
}
