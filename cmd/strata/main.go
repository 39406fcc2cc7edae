package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/coordinator/hostagent/driver/execdriver"
	"github.com/strata-sched/strata/coordinator/telemetry"
)

// Set by the linker: -X main.version=...
var version = "dev"

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	if len(os.Args) > 1 && os.Args[1] == superviseCmd {
		// Hidden: the exec driver's supervisor of one shard's worker process
		// (execdriver.Supervise), started by the host agent, not by people.
		// Dispatched before the CLI so that the worker's arguments after its
		// flags are never parsed as the CLI's.
		os.Exit(execdriver.Supervise(os.Args[2:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// superviseCmd is the hidden subcommand the exec driver runs each shard's
// worker under ("strata supervise --deadline ... -- /path/worker args").
const superviseCmd = "supervise"

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	telemetry.Version = version // strata_build_info
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "strata: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 2
}

// commands lists the constructors of every subcommand; files of this package add
// theirs in init so each command lives in its own file.
var commands []func(*globalOptions) *cobra.Command

// globalOptions are the flags shared by every command.
type globalOptions struct {
	stdout, stderr io.Writer
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globalOptions{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "strata",
		Short: "Strata: a hierarchical, multi-tier load-balancing scheduler for stream-processing shards",
		Long: `Strata decides where the shards of streaming jobs run — which region, which host,
which slot — and keeps re-deciding as load shifts and machines fail.

Client commands reach the local "strata dev" cluster by default; point them at
another cluster with --addr or the STRATA_ADDR environment variable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without Args a root command with subcommands accepts unknown words.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// strata --version prints what strata version does.
	root.Version = version
	info := versionInfo()
	root.SetVersionTemplate(fmt.Sprintf("strata %s (%s, %s/%s)\n", info.Version, info.Go, info.OS, info.Arch))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
	})
	root.AddCommand(newVersionCmd(g))
	for _, c := range commands {
		root.AddCommand(c(g))
	}
	return root
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := versionInfo()
			return out.print(g.stdout, info, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "strata %s (%s, %s/%s)\n", info.Version, info.Go, info.OS, info.Arch)
				return err
			})
		},
	}
	out.register(cmd)
	return cmd
}

type versionJSON struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func versionInfo() versionJSON {
	v := versionJSON{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Commit = s.Value
			}
		}
	}
	return v
}
