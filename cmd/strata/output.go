package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// outputFlag is the -o/--output flag every command that prints results takes.
type outputFlag struct {
	format  string
	allowed []string
}

// register adds -o/--output to cmd. The first of formats is the default; with no
// formats given they are table and json.
func (o *outputFlag) register(cmd *cobra.Command, formats ...string) {
	if len(formats) == 0 {
		formats = []string{"table", "json"}
	}
	o.allowed = formats
	cmd.Flags().StringVarP(&o.format, "output", "o", formats[0], "output format: "+strings.Join(formats, "|"))
}

// check returns an error naming the flag and the allowed values when the format is
// not one of them.
func (o *outputFlag) check() error {
	for _, f := range o.allowed {
		if o.format == f {
			return nil
		}
	}
	return fmt.Errorf("--output: must be one of %s (got %q)", strings.Join(o.allowed, ", "), o.format)
}

// print writes v as indented JSON for -o json, or calls table for -o table.
func (o *outputFlag) print(w io.Writer, v any, table func(io.Writer) error) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return table(w)
}

// newTable returns a tabwriter for aligned table output; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// defaultAddr is where client commands find the cluster: --addr, else STRATA_ADDR,
// else the local "strata dev" cluster.
const devAdminAddr = "127.0.0.1:7400"

// devRaftAdminAddr is where the dev cluster's global replica serves its Raft
// admin endpoint ("strata raft").
const devRaftAdminAddr = "127.0.0.1:7401"

func addrFlag(fs *pflag.FlagSet, addr *string) {
	def := os.Getenv("STRATA_ADDR")
	if def == "" {
		def = devAdminAddr
	}
	fs.StringVar(addr, "addr", def, "Admin API address of the cluster (env STRATA_ADDR; default: the local strata dev cluster)")
}
