package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

func init() { commands = append(commands, newLedgerCmd) }

// newLedgerCmd is "strata ledger": the hosts' ownership ledgers
// (coordinator/hostagent/ledger), read offline.
func newLedgerCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Check the hosts' ownership ledgers (what each host really ran)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newLedgerCheckCmd(g))
	return cmd
}

// ledgerWindow is a --window: a named time range to measure stops in.
type ledgerWindow struct {
	name     string
	from, to time.Time
}

// parseLedgerWindow reads NAME=FROM,TO (RFC 3339 times).
func parseLedgerWindow(s string) (ledgerWindow, error) {
	name, span, ok := strings.Cut(s, "=")
	from, to, ok2 := strings.Cut(span, ",")
	if !ok || !ok2 || name == "" {
		return ledgerWindow{}, fmt.Errorf("--window: must be NAME=FROM,TO with RFC 3339 times (got %q): %w", s, interfaces.ErrInvalid)
	}
	w := ledgerWindow{name: name}
	var err error
	if w.from, err = time.Parse(time.RFC3339Nano, from); err != nil {
		return ledgerWindow{}, fmt.Errorf("--window %s: FROM: must be an RFC 3339 time such as 2026-12-01T22:00:00.5Z (got %q): %w", name, from, interfaces.ErrInvalid)
	}
	if w.to, err = time.Parse(time.RFC3339Nano, to); err != nil {
		return ledgerWindow{}, fmt.Errorf("--window %s: TO: must be an RFC 3339 time such as 2026-12-01T22:00:00.5Z (got %q): %w", name, to, interfaces.ErrInvalid)
	}
	if w.to.Before(w.from) {
		return ledgerWindow{}, fmt.Errorf("--window %s: TO (%s) is before FROM (%s): %w", name, to, from, interfaces.ErrInvalid)
	}
	return w, nil
}

type ledgerCheckJSON struct {
	Events     int                 `json:"events"`
	Hosts      []string            `json:"hosts"`
	Intervals  int                 `json:"intervals"`
	Violations []string            `json:"violations"`
	Torn       []string            `json:"torn,omitempty"`
	Running    map[string][]string `json:"running"` // shard -> hosts at the end
	Expected   int                 `json:"expected,omitempty"`
	Windows    []ledgerWindowJSON  `json:"windows,omitempty"`
}

type ledgerWindowJSON struct {
	Name          string   `json:"name"`
	From          string   `json:"from"`
	To            string   `json:"to"`
	Shards        int      `json:"shards"`
	Stopped       int      `json:"stopped"`
	LongestGap    string   `json:"longest_gap"`
	StoppedShards []string `json:"stopped_shards,omitempty"`
}

func newLedgerCheckCmd(g *globalOptions) *cobra.Command {
	var out outputFlag
	var expect []string
	var windows []string
	cmd := &cobra.Command{
		Use:   "check FILE...",
		Short: "Merge the hosts' ledgers and check one owner per shard, epochs, and what runs",
		Long: `Merge the ownership ledgers of the hosts (each host's <data_dir>/ledger.jsonl) and
check the safety rules on what the hosts really ran: no shard on two hosts at once,
epochs that never go back, well-formed histories. It prints which shards run at the
end and where; with --expect, every expected shard must run on exactly one host at
the end. Each --window NAME=FROM,TO (RFC 3339 times) reports, of the shards that ran
at FROM, how many ran nowhere for a while before TO, and the longest such gap.

The hosts' clocks are compared directly: give ledgers of hosts whose clocks agree
(one machine, or synchronized clocks). Exit status 1 when a rule is broken or an
expected shard does not run on exactly one host.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			var ws []ledgerWindow
			for _, s := range windows {
				w, err := parseLedgerWindow(s)
				if err != nil {
					return usageErr(err)
				}
				ws = append(ws, w)
			}
			var want []interfaces.ShardID
			for _, s := range expect {
				if err := interfaces.ValidateShardID("--expect", s); err != nil {
					return usageErr(err)
				}
				want = append(want, interfaces.ShardID(s))
			}
			res, err := ledger.Check(files...)
			if err != nil {
				return err
			}
			if len(want) > 0 {
				res.ExpectRunning(want)
			}
			rep := ledgerReport(res, ws)
			rep.Expected = len(want)
			if err := out.print(g.stdout, rep, func(w io.Writer) error { return rep.table(w) }); err != nil {
				return err
			}
			if !res.OK() {
				return &exitError{code: 1, err: fmt.Errorf("ledger check: %d violation(s)", len(res.Violations))}
			}
			return nil
		},
	}
	out.register(cmd)
	cmd.Flags().StringSliceVar(&expect, "expect", nil, "shards that must run on exactly one host at the end (comma-separated, or repeated)")
	cmd.Flags().StringArrayVar(&windows, "window", nil, "NAME=FROM,TO: report the shards stopped in this time range (repeatable)")
	return cmd
}

// ledgerReport is what "strata ledger check" prints.
func ledgerReport(res *ledger.Result, ws []ledgerWindow) ledgerCheckJSON {
	rep := ledgerCheckJSON{Events: res.Events, Hosts: res.Hosts, Intervals: len(res.Intervals),
		Violations: []string{}, Running: map[string][]string{}}
	for _, v := range res.Violations {
		rep.Violations = append(rep.Violations, v.String())
	}
	for _, t := range res.Torn {
		rep.Torn = append(rep.Torn, t.String())
	}
	for s, hosts := range res.Running {
		rep.Running[string(s)] = hosts
	}
	for _, w := range ws {
		st := res.Stops(w.name, w.from.UnixNano(), w.to.UnixNano())
		wj := ledgerWindowJSON{Name: w.name, From: w.from.UTC().Format(time.RFC3339Nano), To: w.to.UTC().Format(time.RFC3339Nano),
			Shards: st.Shards, Stopped: st.Stopped, LongestGap: st.Longest.Round(time.Millisecond).String()}
		for _, s := range st.StoppedShards {
			wj.StoppedShards = append(wj.StoppedShards, string(s))
		}
		rep.Windows = append(rep.Windows, wj)
	}
	return rep
}

func (rep ledgerCheckJSON) table(w io.Writer) error {
	fmt.Fprintf(w, "ledgers: %d host(s) (%s), %d events, %d intervals\n", len(rep.Hosts), strings.Join(rep.Hosts, ", "), rep.Events, rep.Intervals)
	for _, t := range rep.Torn {
		fmt.Fprintf(w, "torn: %s\n", t)
	}
	perHost := map[string]int{}
	shards := make([]string, 0, len(rep.Running))
	for s, hosts := range rep.Running {
		shards = append(shards, s)
		for _, h := range hosts {
			perHost[h]++
		}
	}
	sort.Strings(shards)
	counts := make([]string, 0, len(rep.Hosts))
	for _, h := range rep.Hosts {
		counts = append(counts, fmt.Sprintf("%s %d", h, perHost[h]))
	}
	fmt.Fprintf(w, "running at the end: %d shard(s) (%s)", len(shards), strings.Join(counts, ", "))
	if rep.Expected > 0 {
		fmt.Fprintf(w, "; expected %d", rep.Expected)
	}
	fmt.Fprintln(w)
	if len(rep.Windows) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "WINDOW\tFROM\tTO\tSHARDS\tSTOPPED\tLONGEST GAP")
		for _, x := range rep.Windows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", x.Name, x.From, x.To, x.Shards, x.Stopped, x.LongestGap)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "violations: %d\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
	return nil
}
