package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// regionBase is a region config without its acl section; regionYAML has
// "acl: disabled".
const regionBase = `tier: region
instance: eu-1
node_id: eu-1-a
data_dir: /tmp/never-opened
listen: {raft: "127.0.0.1:1", grpc: "127.0.0.1:2"}
parent: ["127.0.0.1:3"]
tls: disabled
`

const regionYAML = regionBase + "acl: disabled\n"

func TestCheckConfig(t *testing.T) {
	tests := []struct {
		name, cmd, body string
		code            int
		want            string
	}{
		{"valid region", "region", regionYAML, 0, "config ok: tier region, instance eu-1, node eu-1-a, chain global → region → host, policy local"},
		{"unknown key", "region", regionYAML + "colour: blue\n", 2, `c.yaml:9: colour: unknown key (known here: tier, chain,`},
		{"bad duration", "region", regionYAML + "control: {lease_ttl: soon}\n", 2, `c.yaml:9: control.lease_ttl: must be a non-negative duration with a unit, such as 500ms, 2s or 1m30s, got "soon"`},
		{"raft on all interfaces", "region", strings.Replace(regionYAML, `raft: "127.0.0.1:1"`, `raft: "0.0.0.0:17300"`, 1), 2, `listen.raft: must name an address others can dial, not all interfaces (got "0.0.0.0:17300")`},
		{"wrong type", "region", regionYAML + "control:\n  interval: 1s\n  max_moves: abc\n", 2, `c.yaml:11: control.max_moves: must be an integer, got "abc"`},
		{"host bad quantity", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: lots}\n", 2, "c.yaml:5: capacity.cpu: must be a non-negative number"},
		{"cycle", "region", regionYAML + "chain: [global, region, rack, region, host]\n", 2, `tier "region" appears twice (a cycle)`},
		{"tier not in chain", "tier", strings.Replace(regionYAML, "tier: region", "tier: rack", 1), 2, `unknown tier "rack"`},
		{"custom tier", "tier", strings.Replace(regionYAML, "tier: region", "tier: rack", 1) + "chain: [global, region, rack, host]\n", 0, "chain global → region → rack → host"},
		{"unknown policy", "region", regionYAML + "policy: {name: nope}\n", 2, `unknown policy "nope"`},
		{"bad policy key", "region", regionYAML + "policy: {name: local, config: {headroom: \"2\"}}\n", 2, `key "headroom": must be in [0, 1)`},
		{"no parent", "region", strings.Replace(regionYAML, `parent: ["127.0.0.1:3"]`, "", 1), 2, "tier region has no parent"},
		{"wrong command", "global", regionYAML, 2, `tier: is "region", but this is 'strata global'`},
		{"valid host", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 8, mem: 16Gi}\n", 0, "config ok: host h1"},
		{"host bad capacity", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 0}\n", 2, "capacity: must be > 0"},
		{"host exec stop timeout too long", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\ndriver: {kind: exec, exec: {command: [sleep, \"60\"], stop_timeout: 2h}}\n", 2, "driver.exec.stop_timeout: must be at most 30m0s"},
		{"host exec env_pass with =", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\ndriver: {kind: exec, exec: {command: [sleep, \"60\"], env_pass: [PATH, \"A=B\"]}}\n", 2, "driver.exec.env_pass[1]: must be a variable name"},
		{"host exec env sets the epoch", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\ndriver: {kind: exec, exec: {command: [sleep, \"60\"], env: [\"STRATA_SHARD_EPOCH=1\"]}}\n", 2, "driver.exec.env[0]: must not set STRATA_SHARD_EPOCH"},
		{"host exec without command", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\ndriver: {kind: exec}\n", 2, "driver.exec.command: is required"},
		{"host unknown driver", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\ndriver: {kind: docker}\n", 2, `driver.kind: must be synthetic, exec or callback (got "docker")`},
		{"acl and children", "region", regionBase + "acl: {enabled: true, bootstrap_token_file: /tmp/t, anonymous_http: [healthz, metrics]}\nchildren: {allow: [h-1], selector: {pool: prod}, gc_after: 24h}\n", 0, "config ok"},
		{"no acl section", "region", regionBase, 2, `acl: is required outside 'strata dev': give acl: {enabled: true}`},
		{"acl not a word", "region", regionBase + "acl: off\n", 2, `c.yaml:8: acl: must be {enabled: true, ...} or the word disabled (got "off")`},
		{"acl unknown key", "region", regionBase + "acl: {enabled: true, token: x}\n", 2, `acl.token: unknown key (known here: enabled, bootstrap_token_file, anonymous_http)`},
		{"acl wrong type", "region", regionBase + "acl: {enabled: maybe}\n", 2, `acl.enabled: `},
		{"acl enabled false", "region", regionBase + "acl: {enabled: false}\n", 0, "config ok"},
		{"acl bad http name", "region", regionBase + "acl: {enabled: true, anonymous_http: [status]}\n", 2, `acl.anonymous_http[0]: must be one of healthz, readyz, metrics (got "status")`},
		{"children bad id", "region", regionYAML + "children: {allow: [a/../b]}\n", 2, `children.allow[0]: must be 1-253 characters`},
		{"children bad gc_after", "region", regionYAML + "children: {gc_after: soon}\n", 2, `children.gc_after: must be a non-negative duration`},
		{"host bad discipline", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\ndriver: {synthetic: {execute: true, discipline: edf}}\n", 2, `driver.synthetic.discipline: must be "llf" or "fifo"`},
		{"no tls section", "region", strings.Replace(regionYAML, "tls: disabled\n", "", 1), 2, `tls: is required outside 'strata dev': give tls: {ca: FILE, cert: FILE, key: FILE}`},
		{"host without tls", "host", "host: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\n", 2, `tls: is required outside 'strata dev'`},
		{"tls not a word", "region", strings.Replace(regionYAML, "tls: disabled", "tls: off", 1), 2, `c.yaml:7: tls: must be {ca: FILE, cert: FILE, key: FILE} or the word disabled (got "off")`},
		{"tls unknown key", "region", strings.Replace(regionYAML, "tls: disabled", "tls: {ca: a, cert: b, key: c, pin: d}", 1), 2, `tls.pin: unknown key (known here: ca, cert, key)`},
		{"tls without key", "region", strings.Replace(regionYAML, "tls: disabled", "tls: {ca: a, cert: b}", 1), 2, `tls.key: is required`},
		{"tls files missing", "region", strings.Replace(regionYAML, "tls: disabled", "tls: {ca: /nonexistent/ca.pem, cert: /nonexistent/c.pem, key: /nonexistent/k.pem}", 1), 2, `tls: stat /nonexistent/ca.pem: no such file or directory`},
		{"callback off loopback without tls", "host", "tls: disabled\nhost: h1\ndata_dir: /tmp/x\nparent: [\"a:1\"]\ncapacity: {cpu: 1}\ndriver: {kind: callback, callback: {listen: \"0.0.0.0:7422\"}}\n", 2, `driver.callback.listen: must be a loopback address (127.0.0.1:PORT) without TLS`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(tt.cmd, "--config", writeFile(t, tt.body), "--check-config")
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Errorf("exit %d (want %d), output %q, want it to contain %q", code, tt.code, out+errOut, tt.want)
			}
		})
	}
}

// TestACLAndChildrenKeys: the acl and children sections reach the daemon's
// configuration; the bootstrap file defaults into data_dir.
func TestACLAndChildrenKeys(t *testing.T) {
	var f tierFile
	body := regionBase + "acl: {enabled: true, anonymous_http: [readyz]}\nchildren: {allow: [h-1, h-2], selector: {pool: prod}, gc_after: 2h}\n"
	if err := decodeStrict("c.yaml", []byte(body), &f); err != nil {
		t.Fatal(err)
	}
	c, err := f.tierConfig(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.ACL.Enabled || c.ACL.BootstrapTokenFile != "/tmp/never-opened/acl-bootstrap-token" || len(c.ACL.AnonymousHTTP) != 1 {
		t.Errorf("acl: %+v", c.ACL)
	}
	if len(c.Children.Allow) != 2 || c.Children.Selector["pool"] != "prod" || c.Children.GCAfter != 2*time.Hour {
		t.Errorf("children: %+v", c.Children)
	}
}
