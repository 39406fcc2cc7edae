package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/coordinator/adminview"
)

func init() { commands = append(commands, newEventsCmd) }

func newEventsCmd(g *globalOptions) *cobra.Command {
	var (
		cf       clientFlags
		out      outputFlag
		follow   bool
		interval time.Duration
		window   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print what happens in the cluster: moves with their reasons, failures, leader changes, alerts",
		Long: `Print what happens in the cluster, one line per event: shards placed or moved
(with the reason and mode of the move, from the placement history: emergency,
periodic, complete, manual for an applied plan…), children drained, failed or
back, sessions opened and lost, leader changes, alerts raised and cleared.

Events are what changed between two views of the tree (the one strata status
shows, walked from --addr down) taken every --interval: a change that comes and
goes within one interval is not seen. The web dashboard's feed is the same
stream (coordinator/adminview).

--follow prints until interrupted (Ctrl-C); without it the command watches for
--for and exits. -o json prints one JSON object per line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			if interval <= 0 {
				return usageErr(fmt.Errorf("--interval: must be > 0 (got %v)", interval))
			}
			if !follow && window <= 0 {
				return usageErr(fmt.Errorf("--for: must be > 0 without --follow (got %v)", window))
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if !follow {
				var cancel func()
				ctx, cancel = context.WithTimeout(ctx, window)
				defer cancel()
			}
			conns := newAdminConns(cf.tlsDir, cf.token)
			defer conns.close()
			enc := json.NewEncoder(g.stdout)
			var first error
			seen := false
			adminview.Watch(ctx, conns.client, cf.addr, interval, cf.timeout, time.Now, func(s *adminview.Snapshot, evs []adminview.Event, err error) {
				if err != nil {
					if !seen && s == nil && first == nil {
						first = err
						stop() // the cluster cannot be read at all
						return
					}
					fmt.Fprintf(g.stderr, "strata: warning: %v\n", err)
				}
				seen = seen || s != nil
				for _, e := range evs {
					if out.format == "json" {
						_ = enc.Encode(e)
						continue
					}
					fmt.Fprintf(g.stdout, "%s  %-13s %s\n", e.At.Local().Format("15:04:05.000"), e.Kind, e.Message)
				}
			})
			if first != nil {
				return remoteCallErr(cf.addr, first)
			}
			return nil
		},
	}
	cf.register(cmd)
	out.register(cmd, "text", "json")
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing events until interrupted")
	f.DurationVar(&interval, "interval", time.Second, "time between two views of the cluster")
	f.DurationVar(&window, "for", 5*time.Second, "without --follow: how long to watch")
	return cmd
}
