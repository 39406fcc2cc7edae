package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/balancer/models"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// newJobAdviseCmd is "strata job advise": DS2's parallelism model, offline on
// DS2's files or live on a job of the cluster. It is a subcommand of "job"
// (newJobCmd adds it).
func newJobAdviseCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var topoFile, ratesFile string
	var ratePerShard float64
	cmd := &cobra.Command{
		Use:   "advise [JOB]",
		Short: "Advise how many shards a job needs (DS2's model)",
		Long: `Advise parallelism with DS2's model ("Three steps is all you need", OSDI 2018):
an operator needs ceil(target input rate / true processing rate per instance)
instances, where true rates are per unit of busy time; a source's target rate is
its true output rate, and each operator's target output rate (its input rate
times its selectivity, true output / true processing) is the target input of
the operators downstream. One step, no iteration.

Offline, on DS2's file formats:

  strata job advise --topology FILE --rates FILE

--topology is DS2's topology CSV (one edge per line: operator_id1,
operator_name1, total_number_of_operator_instances1, operator_id2,
operator_name2, total_number_of_operator_instances2) and --rates its rates log
(operator_id, operator_instance_id, total_number_of_operator_instances,
epoch_timestamp, true_processing_rate, true_output_rate,
observed_processing_rate, observed_output_rate); '#' lines are comments. A line
for an instance already seen starts the next measurement window. Prints, per
window and operator, the current and advised parallelism and the target rates.
Sources are not resized.

Live, on a job of the cluster:

  strata job advise JOB --rate-per-shard R [--addr A]

A Strata job is one operator: its target input rate is the sum of its shards'
input rates, read from the global tier's Admin API (ListShards). The true
processing rate of a shard — records/s it processes per unit of busy time — is
not exposed by the Admin API yet, so it must be given with --rate-per-shard
(measure it, e.g. from a load test). Prints the current and advised shards.`,
		Example: `  strata job advise --topology flink_wordcount_topology.csv --rates flink_rates.log
  strata job advise wordcount --rate-per-shard 450 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			offline := topoFile != "" || ratesFile != ""
			rateSet := cmd.Flags().Changed("rate-per-shard")
			switch {
			case offline && len(args) > 0:
				return usageErr(fmt.Errorf("give either JOB (live) or --topology and --rates (offline), not both: %w", interfaces.ErrInvalid))
			case offline && (topoFile == "" || ratesFile == ""):
				return usageErr(fmt.Errorf("--topology and --rates: offline advice needs both files: %w", interfaces.ErrInvalid))
			case offline && rateSet:
				return usageErr(fmt.Errorf("--rate-per-shard: only for live advice on a JOB; offline the rates come from --rates: %w", interfaces.ErrInvalid))
			case !offline && len(args) == 0:
				return usageErr(fmt.Errorf("give a JOB (live advice) or --topology and --rates (offline advice): %w", interfaces.ErrInvalid))
			case !offline && !rateSet:
				return usageErr(fmt.Errorf("--rate-per-shard: required for live advice (the Admin API does not expose measured processing rates yet): %w", interfaces.ErrInvalid))
			}
			if offline {
				return adviseOffline(g.stdout, &out, topoFile, ratesFile)
			}
			if !(ratePerShard > 0) || math.IsInf(ratePerShard, 0) {
				return usageErr(fmt.Errorf("--rate-per-shard: must be a finite number > 0 records/s, got %v: %w", ratePerShard, interfaces.ErrInvalid))
			}
			if err := interfaces.ValidateID("JOB", args[0]); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			return adviseLive(g.stdout, &out, cf, args[0], ratePerShard)
		},
	}
	cf.register(cmd)
	out.register(cmd)
	cmd.Flags().StringVar(&topoFile, "topology", "", "offline: DS2 topology CSV file")
	cmd.Flags().StringVar(&ratesFile, "rates", "", "offline: DS2 rates log file")
	cmd.Flags().Float64Var(&ratePerShard, "rate-per-shard", 0, "live: true processing rate of one shard, records/s per unit of busy time (not yet measured by the Admin API)")
	return cmd
}

// adviseOffline reads DS2's two files and prints the advice of every window.
func adviseOffline(w io.Writer, out *outputFlag, topoFile, ratesFile string) error {
	tf, err := os.Open(topoFile)
	if err != nil {
		return usageErr(fmt.Errorf("--topology: %w", err))
	}
	defer tf.Close()
	topo, err := models.ParseTopology(tf, topoFile)
	if err != nil {
		return usageErr(err)
	}
	rf, err := os.Open(ratesFile)
	if err != nil {
		return usageErr(fmt.Errorf("--rates: %w", err))
	}
	defer rf.Close()
	wins, err := models.ParseRates(rf, ratesFile)
	if err != nil {
		return usageErr(err)
	}
	advice, err := models.AdviseAll(topo, wins)
	if err != nil {
		return usageErr(fmt.Errorf("%s with %s: %w", ratesFile, topoFile, err))
	}
	return out.print(w, advice, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "WINDOW\tOPERATOR\tCURRENT\tADVISED\tEXACT\tTARGET IN/S\tTARGET OUT/S\tTRUE RATE/INSTANCE\tNOTE")
		for _, a := range advice {
			for _, o := range a.Operators {
				note := o.Note
				exact := strconv.FormatFloat(o.Exact, 'f', 3, 64)
				if o.Source {
					note, exact = "source: not resized", "-"
				}
				in, per := formatRate(o.TargetInput), formatRate(o.TrueRatePerInstance)
				if o.Source {
					in, per = "-", "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Window, o.Operator, o.Current, o.Advised, exact,
					in, formatRate(o.TargetOutput), per, note)
			}
		}
		return tw.Flush()
	})
}

// jobAdviseJSON is the output of live "job advise".
type jobAdviseJSON struct {
	Job string `json:"job"`
	models.JobAdvice
	// RateSource says where the true processing rate per shard came from.
	RateSource string `json:"rate_source"`
}

// adviseLive sizes one job of the cluster from its shards' input rates.
func adviseLive(w io.Writer, out *outputFlag, cf clientFlags, job string, ratePerShard float64) error {
	ctx, c, done, err := cf.admin()
	if err != nil {
		return err
	}
	defer done()
	resp, err := c.ListShards(ctx, &wire.ListShardsRequest{Job: job})
	if err != nil {
		return remoteCallErr(cf.addr, err)
	}
	var rates []float64
	for _, s := range resp.GetShards() {
		if s.GetShard().GetJob() == job {
			rates = append(rates, s.GetShard().GetInputRate())
		}
	}
	if len(rates) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("job %q: no shards at %s (see 'strata job list'): %w", job, cf.addr, interfaces.ErrNotFound)}
	}
	a, err := models.AdviseJob(rates, ratePerShard)
	if err != nil {
		// The cluster's rates (or the flag against them) make advice impossible.
		return &exitError{code: 1, err: fmt.Errorf("job %q: %w", job, err)}
	}
	res := jobAdviseJSON{Job: job, JobAdvice: a, RateSource: "--rate-per-shard (the Admin API does not expose measured rates yet)"}
	return out.print(w, res, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "JOB\tCURRENT SHARDS\tADVISED SHARDS\tEXACT\tINPUT/S\tRATE/SHARD\tUTILIZATION NOW")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%s\t%s\t%.0f%%\n", job, a.Current, a.Advised, a.Exact,
			formatRate(a.TargetInput), formatRate(a.RatePerShard), 100*a.Utilization)
		return tw.Flush()
	})
}

// formatRate prints records/s: whole numbers from 100 up, else 4 significant
// digits.
func formatRate(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
