package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/tlsutil"
)

func init() { commands = append(commands, newTLSCmd) }

func newTLSCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls ca|cert|show",
		Short: "Make a CA and the certificates of replicas, hosts, plugins, workers and operators",
		Long: `Make the certificates mutual TLS needs (docs/security.md):

  strata tls ca   --out DIR                                      a CA (ca.pem, ca-key.pem)
  strata tls cert --ca DIR --role global --id g1 --dns g1.example --out DIR
  strata tls cert --ca DIR --role region --instance eu-1 --id eu-1-1 --dns ... --out DIR
  strata tls cert --ca DIR --role host --id h-7 --out DIR
  strata tls cert --ca DIR --role operator --id alice --out DIR
  strata tls show DIR/cert.pem

A certificate names its role and identity in a URI SAN (strata://host/h-7,
strata://region/eu-1/eu-1-1, strata://operator/alice); a server's also lists the DNS
names and IPs it is dialled by (--dns, --ip), which clients check. cert writes
cert.pem, key.pem and a copy of ca.pem to --out: point a daemon's tls section at
them, or a client command's --tls at the directory.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTLSCACmd(g), newTLSCertCmd(g), newTLSShowCmd(g))
	return cmd
}

func newTLSCACmd(g *globalOptions) *cobra.Command {
	var (
		out, name string
		days      int
	)
	cmd := &cobra.Command{
		Use:   "ca --out DIR",
		Short: "Make a CA: DIR/ca.pem (give it to every daemon) and DIR/ca-key.pem (keep it offline)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if out == "" {
				return usageErr(fmt.Errorf("--out: is required: %w", interfaces.ErrInvalid))
			}
			if days < 1 {
				return usageErr(fmt.Errorf("--days: must be ≥ 1 (got %d): %w", days, interfaces.ErrInvalid))
			}
			now := time.Now()
			ca, err := tlsutil.NewCA(name, now.Add(-time.Hour), now.AddDate(0, 0, days))
			if err != nil {
				return err
			}
			if err := ca.WriteCA(out); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s and %s (valid until %s)\n", filepath.Join(out, tlsutil.CAFile), filepath.Join(out, tlsutil.CAKeyFile), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write ca.pem and ca-key.pem to (required; an existing CA key is never overwritten)")
	f.StringVar(&name, "name", "Strata CA", "the CA's common name")
	f.IntVar(&days, "days", 3650, "validity in days")
	return cmd
}

// certIdentity is the identity the cert flags name.
func certIdentity(role, instance, id string) (tlsutil.Identity, error) {
	var ident tlsutil.Identity
	switch role {
	case "":
		return ident, fmt.Errorf("--role: is required: global, region (or a custom tier's name, with --instance), host, plugin, operator or worker: %w", interfaces.ErrInvalid)
	case tlsutil.RoleHost, tlsutil.RolePlugin, tlsutil.RoleOperator, tlsutil.RoleWorker:
		if instance != "" {
			return ident, fmt.Errorf("--instance: only tier replicas have one, not a %s: %w", role, interfaces.ErrInvalid)
		}
		ident = tlsutil.Named(role, id)
	case interfaces.TierGlobal:
		if instance == "" {
			instance = "global"
		}
		ident = tlsutil.Replica(role, instance, id)
	default:
		if instance == "" {
			return ident, fmt.Errorf("--instance: is required for a replica of tier %s (e.g. --instance eu-1): %w", role, interfaces.ErrInvalid)
		}
		ident = tlsutil.Replica(role, instance, id)
	}
	if id == "" {
		return ident, fmt.Errorf("--id: is required (the node ID of a replica; the name of a host, plugin, operator or worker): %w", interfaces.ErrInvalid)
	}
	if err := ident.Validate(); err != nil {
		return ident, fmt.Errorf("%v: %w", err, interfaces.ErrInvalid)
	}
	return ident, nil
}

func newTLSCertCmd(g *globalOptions) *cobra.Command {
	var (
		caDir, out, role, instance, id string
		dns, ips                       []string
		days                           int
	)
	cmd := &cobra.Command{
		Use:   "cert --ca DIR --role ROLE [--instance INSTANCE] --id ID [--dns NAME,...] [--ip IP,...] --out DIR",
		Short: "Issue a certificate for a replica, host, plugin, worker or operator",
		Long: `Issue a certificate signed by the CA in --ca, naming one identity:

  --role global --id NODE                       a global tier replica (strata://global/global/NODE)
  --role region --instance eu-1 --id NODE       a region replica (strata://region/eu-1/NODE);
                                                any custom tier the same way (--role rack)
  --role host --id h-7                          a host agent (strata://host/h-7)
  --role plugin --id NAME                       a policy plugin's server
  --role worker --id NAME                       a worker attaching to a host's callback service
  --role operator --id alice                    a person or tool using the Admin API

Servers (replicas, plugins, hosts with a callback service) are dialled by name:
list every DNS name and IP they are dialled by with --dns and --ip.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ident, err := certIdentity(role, instance, id)
			if err != nil {
				return usageErr(err)
			}
			if caDir == "" || out == "" {
				return usageErr(fmt.Errorf("--ca and --out: are required: %w", interfaces.ErrInvalid))
			}
			if days < 1 {
				return usageErr(fmt.Errorf("--days: must be ≥ 1 (got %d): %w", days, interfaces.ErrInvalid))
			}
			var ipList []net.IP
			for _, s := range ips {
				ip := net.ParseIP(s)
				if ip == nil {
					return usageErr(fmt.Errorf("--ip: %q is not an IP address: %w", s, interfaces.ErrInvalid))
				}
				ipList = append(ipList, ip)
			}
			ca, err := tlsutil.LoadCA(caDir)
			if err != nil {
				return usageErr(fmt.Errorf("%v: %w", err, interfaces.ErrInvalid))
			}
			now := time.Now()
			notAfter := now.AddDate(0, 0, days)
			if notAfter.After(ca.Cert.NotAfter) {
				notAfter = ca.Cert.NotAfter
			}
			certPEM, keyPEM, err := ca.Issue(tlsutil.CertRequest{Identity: ident, DNS: dns, IPs: ipList, NotBefore: now.Add(-time.Hour), NotAfter: notAfter})
			if err != nil {
				return usageErr(fmt.Errorf("%v: %w", err, interfaces.ErrInvalid))
			}
			if err := ca.WritePair(out, certPEM, keyPEM); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s, %s and %s: %s, valid until %s", filepath.Join(out, tlsutil.CertFile), filepath.Join(out, tlsutil.KeyFile), filepath.Join(out, tlsutil.CAFile), ident, notAfter.UTC().Format(time.RFC3339))
			if names := append(append([]string{}, dns...), ips...); len(names) > 0 {
				fmt.Fprintf(g.stdout, ", for %s", strings.Join(names, ", "))
			}
			fmt.Fprintln(g.stdout)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "directory of the CA ('strata tls ca --out'): ca.pem and ca-key.pem (required)")
	f.StringVar(&out, "out", "", "directory to write cert.pem, key.pem and ca.pem to (required; replaced atomically, so a running daemon reloads them)")
	f.StringVar(&role, "role", "", "global, region (or a custom tier's name), host, plugin, worker or operator (required)")
	f.StringVar(&instance, "instance", "", "the tier instance of a replica (eu-1); global for the global tier")
	f.StringVar(&id, "id", "", "the replica's node ID, or the host's, plugin's, worker's or operator's name (required)")
	f.StringSliceVar(&dns, "dns", nil, "DNS names the holder is dialled by (comma-separated)")
	f.StringSliceVar(&ips, "ip", nil, "IP addresses the holder is dialled by (comma-separated)")
	f.IntVar(&days, "days", 365, "validity in days (at most the CA's)")
	return cmd
}

func newTLSShowCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show CERT.pem",
		Short: "Print the identity, names and validity of a certificate",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := tlsutil.ReadCertPEM(args[0])
			if err != nil {
				return usageErr(err)
			}
			id, err := tlsutil.FromCert(c)
			name := "none (" + fmt.Sprint(err) + ")"
			if err == nil {
				name = id.String() + " (" + id.Describe() + ")"
			}
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			fmt.Fprintf(g.stdout, "identity:  %s\nissuer:    %s\ndns:       %s\nip:        %s\nvalid:     %s to %s\n", name, c.Issuer.CommonName,
				strings.Join(c.DNSNames, ", "), strings.Join(ips, ", "), c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
			return nil
		},
	}
}
