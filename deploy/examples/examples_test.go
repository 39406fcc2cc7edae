package examples

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/internal/tlsutil"
	"gopkg.in/yaml.v3"
)

// strataBin is the cmd/strata binary built once by TestMain; testCA signs the
// certificates localize gives the configs with a tls section.
var (
	strataBin string
	testCA    *tlsutil.CA
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "strata-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	now := time.Now()
	if testCA, err = tlsutil.NewCA("examples test CA", now.Add(-time.Hour), now.Add(24*time.Hour)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	strataBin = filepath.Join(dir, "strata")
	build := exec.Command("go", "build", "-o", strataBin, "./cmd/strata")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cmd/strata: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// moduleRoot walks up from the working directory to the go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// daemonCase is one daemon to start: the command line (with "{config}" where the
// config file's path goes) and the config file's contents.
type daemonCase struct {
	name   string
	args   []string
	config []byte
}

// The files in this directory that are not daemon configs.
var notDaemonConfigs = map[string]bool{"job.yaml": true}

// wantExamples are the files the brief asks for; the test fails if one is missing.
var wantExamples = []string{
	"global-1.yaml", "global-2.yaml", "global-3.yaml",
	"region-eu-1-1.yaml", "region-eu-1-2.yaml", "region-eu-1-3.yaml",
	"host-synthetic.yaml", "host-exec.yaml", "host-callback.yaml",
	"rack-a-1.yaml",
}

// fileCases returns a case per daemon config matching pattern; the command comes
// from the file itself: "host" when it has a host key, else its tier.
func fileCases(t *testing.T, pattern string) []daemonCase {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var cases []daemonCase
	for _, f := range files {
		if notDaemonConfigs[filepath.Base(f)] {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := commandOf(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, daemonCase{name: f, args: []string{cmd, "--config", "{config}"}, config: data})
	}
	return cases
}

// commandOf picks the daemon command for a config from its top-level keys.
func commandOf(data []byte) (string, error) {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return "", err
	}
	if _, ok := top["host"]; ok {
		return "host", nil
	}
	switch tier, _ := top["tier"].(string); tier {
	case "global", "region":
		return tier, nil
	case "":
		return "", fmt.Errorf("neither a host nor a tier key")
	default:
		return "tier", nil
	}
}

func TestExamplesExist(t *testing.T) {
	for _, f := range wantExamples {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("example %s: %v", f, err)
		}
	}
}

func TestExamplesStart(t *testing.T) {
	cases := fileCases(t, "*.yaml")
	if len(cases) != len(wantExamples) {
		t.Errorf("found %d daemon configs, want %d", len(cases), len(wantExamples))
	}
	runCases(t, cases)
}

func TestComposeConfigsStart(t *testing.T) {
	cases := fileCases(t, "../compose/config/*.yaml")
	// 3 global, 3 region, 3 host replicas.
	if len(cases) != 9 {
		t.Fatalf("found %d compose configs, want 9", len(cases))
	}
	runCases(t, cases)
}

func runCases(t *testing.T, cases []daemonCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := localize(c.config, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Run("starts", func(t *testing.T) { expectRunning(t, c.args, cfg) })
			t.Run("unknown key rejected", func(t *testing.T) {
				bad := append(append([]byte{}, cfg...), []byte("\nno_such_key: 1\n")...)
				expectConfigError(t, c.args, bad, `: no_such_key: unknown key (known here: `)
			})
		})
	}
}

// localize rewrites what cannot work on a test machine: every listen address
// (listen.* and driver.callback.listen) becomes 127.0.0.1:0, data_dir a
// temporary directory, and the files of a tls section certificates of the
// test CA for the identity the config names (host, or tier/instance/node_id),
// written under it, and acl.bootstrap_token_file a token file written there.
// Everything else, unknown keys included, is kept.
func localize(data []byte, dataDir string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	top := doc.Content[0]
	if v := mapValue(top, "data_dir"); v != nil {
		v.Value = dataDir
	}
	if l := mapValue(top, "listen"); l != nil && l.Kind == yaml.MappingNode {
		for i := 1; i < len(l.Content); i += 2 {
			l.Content[i].Value = "127.0.0.1:0"
		}
	}
	if tl := mapValue(top, "tls"); tl != nil && tl.Kind == yaml.MappingNode {
		if err := localTLS(top, tl, filepath.Join(dataDir, "tls")); err != nil {
			return nil, err
		}
	}
	if a := mapValue(top, "acl"); a != nil {
		if v := mapValue(a, "bootstrap_token_file"); v != nil {
			// The compose cluster's file, made by certs.sh: a token of the same form.
			v.Value = filepath.Join(dataDir, "bootstrap-token")
			if err := os.WriteFile(v.Value, []byte("strata_examples-test-bootstrap-token-0123456789abcdef\n"), 0o600); err != nil {
				return nil, err
			}
		}
	}
	if d := mapValue(top, "driver"); d != nil {
		if cb := mapValue(d, "callback"); cb != nil {
			if v := mapValue(cb, "listen"); v != nil {
				v.Value = "127.0.0.1:0"
			}
		}
	}
	return yaml.Marshal(&doc)
}

// localTLS issues a certificate for the identity the config top names into
// dir and points the tls section tl at it.
func localTLS(top, tl *yaml.Node, dir string) error {
	str := func(key string) string {
		if v := mapValue(top, key); v != nil {
			return v.Value
		}
		return ""
	}
	var id tlsutil.Identity
	if h := str("host"); h != "" {
		id = tlsutil.Named(tlsutil.RoleHost, h)
	} else {
		instance := str("instance")
		if instance == "" && str("tier") == "global" {
			instance = "global"
		}
		id = tlsutil.Replica(str("tier"), instance, str("node_id"))
	}
	now := time.Now()
	certPEM, keyPEM, err := testCA.Issue(tlsutil.CertRequest{Identity: id, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)})
	if err != nil {
		return fmt.Errorf("tls: %v", err)
	}
	if err := testCA.WritePair(dir, certPEM, keyPEM); err != nil {
		return err
	}
	for key, file := range map[string]string{"ca": tlsutil.CAFile, "cert": tlsutil.CertFile, "key": tlsutil.KeyFile} {
		v := mapValue(tl, key)
		if v == nil {
			return fmt.Errorf("tls: no %s", key)
		}
		v.Value = filepath.Join(dir, file)
	}
	return nil
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// daemon is a started strata process.
type daemon struct {
	cmd    *exec.Cmd
	stderr *testutil.Buffer
	done   chan error
}

func start(t *testing.T, args []string, config []byte) *daemon {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		t.Fatal(err)
	}
	argv := make([]string, len(args))
	for i, a := range args {
		argv[i] = strings.ReplaceAll(a, "{config}", path)
	}
	d := &daemon{cmd: exec.Command(strataBin, argv...), stderr: &testutil.Buffer{}, done: make(chan error, 1)}
	d.cmd.Stderr = d.stderr
	d.cmd.Stdout = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

// expectRunning starts the daemon, waits for its start-up line (a config error
// would end it before that line), checks it is still up a second later with no
// error printed, then stops it with SIGTERM and checks it exits cleanly.
func expectRunning(t *testing.T, args []string, config []byte) {
	d := start(t, args, config)
	want := "serving on"
	if args[0] == "host" {
		want = "connecting to"
	}
	deadline := time.After(20 * time.Second)
	for !strings.Contains(d.stderr.String(), want) {
		select {
		case err := <-d.done:
			t.Fatalf("strata %s exited early (%v):\n%s", args[0], err, d.stderr.String())
		case <-deadline:
			t.Fatalf("strata %s did not print %q within 20s:\n%s", args[0], want, d.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case err := <-d.done:
		t.Fatalf("strata %s exited within a second of starting (%v):\n%s", args[0], err, d.stderr.String())
	case <-time.After(time.Second):
	}
	if out := d.stderr.String(); strings.Contains(out, "strata: ") {
		t.Errorf("strata %s printed an error:\n%s", args[0], out)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("strata %s after SIGTERM: %v\n%s", args[0], err, d.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("strata %s still running 15s after SIGTERM:\n%s", args[0], d.stderr.String())
	}
}

// expectConfigError starts the daemon and expects it to exit at once, non-zero,
// with want in its error.
func expectConfigError(t *testing.T, args []string, config []byte, want string) {
	d := start(t, args, config)
	select {
	case err := <-d.done:
		if err == nil {
			t.Fatalf("strata %s exited 0 on a bad config", args[0])
		}
		if out := d.stderr.String(); !strings.Contains(out, want) {
			t.Errorf("strata %s: error does not contain %q:\n%s", args[0], want, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("strata %s kept running on a bad config:\n%s", args[0], d.stderr.String())
	}
}

// k8sObject is the part of a Kubernetes manifest the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		ClusterIP           string `yaml:"clusterIP"`
		ServiceName         string `yaml:"serviceName"`
		Replicas            int    `yaml:"replicas"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		Template            struct {
			Spec struct {
				Containers []struct {
					Args []string `yaml:"args"`
					Env  []struct {
						Name      string `yaml:"name"`
						ValueFrom struct {
							FieldRef struct {
								FieldPath string `yaml:"fieldPath"`
							} `yaml:"fieldRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					VolumeMounts []struct {
						Name        string `yaml:"name"`
						MountPath   string `yaml:"mountPath"`
						SubPath     string `yaml:"subPath"`
						SubPathExpr string `yaml:"subPathExpr"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name      string `yaml:"name"`
					ConfigMap struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					Secret struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func readManifests(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob("../k8s/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var objs []k8sObject
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var o k8sObject
			if err := dec.Decode(&o); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "" {
				t.Fatalf("%s: a document without kind", f)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

// TestKubernetesManifests starts the pod command of every StatefulSet and
// DaemonSet with its ConfigMap, as pod 0 would run it, and checks that each
// StatefulSet's peers are its own pods' stable DNS names.
func TestKubernetesManifests(t *testing.T) {
	objs := readManifests(t)
	secrets := k8sSecrets(t, "node-a")
	configMaps := map[string]map[string]string{}
	headless := map[string]bool{}
	for _, o := range objs {
		switch {
		case o.Kind == "ConfigMap":
			configMaps[o.Metadata.Name] = o.Data
		case o.Kind == "Service" && o.Spec.ClusterIP == "None":
			headless[o.Metadata.Name] = true
		}
	}
	var cases []daemonCase
	workloads := 0
	for _, o := range objs {
		if o.Kind != "StatefulSet" && o.Kind != "DaemonSet" {
			continue
		}
		workloads++
		ps := o.Spec.Template.Spec
		if len(ps.Containers) != 1 {
			t.Fatalf("%s/%s: want one container, got %d", o.Kind, o.Metadata.Name, len(ps.Containers))
		}
		c := ps.Containers[0]
		// The values the downward API would give pod 0 on a node "node-a".
		fields := map[string]string{"metadata.name": o.Metadata.Name + "-0", "status.podIP": "127.0.0.1", "spec.nodeName": "node-a"}
		env := map[string]string{}
		for _, e := range c.Env {
			v, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("%s: env %s: unexpected fieldRef %q", o.Metadata.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		}
		// The config file: --config=<mountPath>/<key> of a ConfigMap volume.
		var config []byte
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			for k, v := range env {
				a = strings.ReplaceAll(a, "$("+k+")", v)
			}
			if strings.Contains(a, "$(") {
				t.Fatalf("%s: argument %q names an undefined variable", o.Metadata.Name, c.Args[i])
			}
			name, value, isFlag := strings.Cut(a, "=")
			switch {
			case isFlag && name == "--config":
				config = configFromMounts(t, o, value, configMaps)
				a = "--config={config}"
			case isFlag && strings.HasPrefix(name, "--listen-"):
				a = name + "=127.0.0.1:0"
			}
			args[i] = a
		}
		if config == nil {
			t.Fatalf("%s: no --config=FILE argument", o.Metadata.Name)
		}
		// The identity the flags give (--node-id, --host) goes into the config
		// too, so that localize issues the certificate the pod's would name.
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--node-id="); ok {
				config = setKey(t, config, "node_id", v)
			}
			if v, ok := strings.CutPrefix(a, "--host="); ok {
				config = setKey(t, config, "host", v)
			}
		}
		checkSecretMounts(t, o, env, config, secrets)
		if o.Kind == "StatefulSet" {
			if !headless[o.Spec.ServiceName] {
				t.Errorf("%s: serviceName %q is not a headless Service of the manifests", o.Metadata.Name, o.Spec.ServiceName)
			}
			if o.Spec.Replicas != 3 {
				t.Errorf("%s: replicas %d, want 3", o.Metadata.Name, o.Spec.Replicas)
			}
			if o.Spec.PodManagementPolicy != "Parallel" {
				t.Errorf("%s: podManagementPolicy %q, want Parallel (no replica is ready before a quorum runs)", o.Metadata.Name, o.Spec.PodManagementPolicy)
			}
			checkPeers(t, o, config)
		}
		cases = append(cases, daemonCase{name: "k8s/" + o.Metadata.Name, args: args, config: config})
	}
	// global, region eu-1, hosts.
	if workloads != 3 {
		t.Fatalf("found %d workloads, want 3", workloads)
	}
	runCases(t, cases)
}

func configFromMounts(t *testing.T, o k8sObject, path string, configMaps map[string]map[string]string) []byte {
	t.Helper()
	ps := o.Spec.Template.Spec
	for _, m := range ps.Containers[0].VolumeMounts {
		if filepath.Dir(path) != m.MountPath {
			continue
		}
		for _, v := range ps.Volumes {
			if v.Name == m.Name && v.ConfigMap.Name != "" {
				cm, ok := configMaps[v.ConfigMap.Name]
				if !ok {
					t.Fatalf("%s: ConfigMap %q is not in the manifests", o.Metadata.Name, v.ConfigMap.Name)
				}
				data, ok := cm[filepath.Base(path)]
				if !ok {
					t.Fatalf("%s: ConfigMap %q has no key %q", o.Metadata.Name, v.ConfigMap.Name, filepath.Base(path))
				}
				return []byte(data)
			}
		}
	}
	t.Fatalf("%s: --config=%s is not in a ConfigMap volume", o.Metadata.Name, path)
	return nil
}

// checkPeers: the peers of a StatefulSet's config are exactly its pods, by ID and
// by stable DNS name through its headless Service.
func checkPeers(t *testing.T, o k8sObject, config []byte) {
	t.Helper()
	var f struct {
		Peers []struct{ ID, Raft, GRPC string } `yaml:"peers"`
	}
	if err := yaml.Unmarshal(config, &f); err != nil {
		t.Fatalf("%s: %v", o.Metadata.Name, err)
	}
	if len(f.Peers) != o.Spec.Replicas {
		t.Errorf("%s: %d peers for %d replicas", o.Metadata.Name, len(f.Peers), o.Spec.Replicas)
	}
	for i, p := range f.Peers {
		pod := fmt.Sprintf("%s-%d", o.Metadata.Name, i)
		host := fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, o.Spec.ServiceName, o.Metadata.Namespace)
		if p.ID != pod || p.Raft != host+":7300" || p.GRPC != host+":7400" {
			t.Errorf("%s: peers[%d] = %+v, want id %s at %s:7300/7400", o.Metadata.Name, i, p, pod, host)
		}
	}
}

// withTLS rewrites the tls section of a (localized) config: "" removes it,
// anything else becomes its value.
func withTLS(t *testing.T, data []byte, value string) []byte {
	return withSection(t, data, "tls", value)
}

// withSection rewrites the top-level section key of a config: "" removes it,
// anything else becomes its value.
func withSection(t *testing.T, data []byte, key, value string) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == key {
			if value == "" {
				top.Content = append(top.Content[:i], top.Content[i+2:]...)
			} else {
				top.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Value: value}
			}
			break
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTLSRequiredOutsideDev: an example without its tls section refuses to
// start and says what to write; with "tls: disabled" it starts and warns.
func TestTLSRequiredOutsideDev(t *testing.T) {
	for _, c := range fileCases(t, "region-eu-1-1.yaml") {
		cfg, err := localize(c.config, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		expectConfigError(t, c.args, withTLS(t, cfg, ""), `tls: is required outside 'strata dev': give tls: {ca: FILE, cert: FILE, key: FILE}`)
		d := start(t, c.args, withTLS(t, cfg, "disabled"))
		testutil.Until(t, "the plaintext warning", 20*time.Second, func() bool {
			return strings.Contains(d.stderr.String(), "warning: tls: disabled: sessions, the Admin API and Raft run in plaintext")
		})
	}
	for _, c := range fileCases(t, "host-synthetic.yaml") {
		cfg, err := localize(c.config, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		expectConfigError(t, c.args, withTLS(t, cfg, ""), `tls: is required outside 'strata dev'`)
		d := start(t, c.args, withTLS(t, cfg, "disabled"))
		testutil.Until(t, "the plaintext warning", 20*time.Second, func() bool {
			return strings.Contains(d.stderr.String(), "warning: tls: disabled: the session to the parent runs in plaintext")
		})
	}
}

// setKey sets a top-level key of a YAML mapping.
func setKey(t *testing.T, data []byte, key, value string) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	top := doc.Content[0]
	if v := mapValue(top, key); v != nil {
		v.Value = value
	} else {
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &yaml.Node{Kind: yaml.ScalarNode, Value: value})
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// k8sSecrets runs deploy/k8s/secrets.sh for the given nodes and returns the
// keys of each Secret it makes.
func k8sSecrets(t *testing.T, nodes ...string) map[string]map[string]bool {
	t.Helper()
	cmd := exec.Command("../k8s/secrets.sh", nodes...)
	cmd.Env = append(os.Environ(), "STRATA="+strataBin, "STRATA_SECRETS_DIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/k8s/secrets.sh: %v\n%s", err, stderr.String())
	}
	secrets := map[string]map[string]bool{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var s struct {
			Kind     string                `yaml:"kind"`
			Metadata struct{ Name string } `yaml:"metadata"`
			Data     map[string]string     `yaml:"data"`
		}
		if err := dec.Decode(&s); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("deploy/k8s/secrets.sh's output: %v", err)
		}
		if s.Kind != "Secret" {
			t.Fatalf("deploy/k8s/secrets.sh made a %q, want only Secrets", s.Kind)
		}
		secrets[s.Metadata.Name] = map[string]bool{}
		for k := range s.Data {
			secrets[s.Metadata.Name][k] = true
		}
	}
	return secrets
}

// checkSecretMounts: every file the config's tls and acl sections name is
// mounted into the container from a Secret that deploy/k8s/secrets.sh makes,
// with a key it has (subPathExpr expanded as the kubelet would for pod 0 on
// node-a).
func checkSecretMounts(t *testing.T, o k8sObject, env map[string]string, config []byte, secrets map[string]map[string]bool) {
	t.Helper()
	var f struct {
		TLS map[string]string `yaml:"tls"`
		ACL struct {
			BootstrapTokenFile string `yaml:"bootstrap_token_file"`
		} `yaml:"acl"`
	}
	if err := yaml.Unmarshal(config, &f); err != nil {
		t.Fatalf("%s: the tls section must be {ca, cert, key} files: %v", o.Metadata.Name, err)
	}
	files := []string{f.TLS["ca"], f.TLS["cert"], f.TLS["key"]}
	if f.ACL.BootstrapTokenFile != "" {
		files = append(files, f.ACL.BootstrapTokenFile)
	}
	ps := o.Spec.Template.Spec
	for _, file := range files {
		if file == "" {
			t.Errorf("%s: the config has no tls files (want mutual TLS, as compose)", o.Metadata.Name)
			continue
		}
		found := false
		for _, m := range ps.Containers[0].VolumeMounts {
			key := ""
			switch {
			case m.MountPath == file && m.SubPath != "":
				key = m.SubPath
			case m.MountPath == file && m.SubPathExpr != "":
				key = m.SubPathExpr
				for k, v := range env {
					key = strings.ReplaceAll(key, "$("+k+")", v)
				}
			case m.SubPath == "" && m.SubPathExpr == "" && filepath.Dir(file) == m.MountPath:
				key = filepath.Base(file)
			default:
				continue
			}
			for _, v := range ps.Volumes {
				if v.Name != m.Name {
					continue
				}
				keys, ok := secrets[v.Secret.SecretName]
				switch {
				case v.Secret.SecretName == "":
					t.Errorf("%s: %s is mounted from volume %q, which is not a Secret", o.Metadata.Name, file, v.Name)
				case !ok:
					t.Errorf("%s: %s: deploy/k8s/secrets.sh makes no Secret %q", o.Metadata.Name, file, v.Secret.SecretName)
				case !keys[key]:
					t.Errorf("%s: %s: Secret %q has no key %q (it has %v)", o.Metadata.Name, file, v.Secret.SecretName, key, keys)
				}
				found = true
			}
		}
		if !found {
			t.Errorf("%s: the config names %s, but no volume of the pod mounts it", o.Metadata.Name, file)
		}
	}
}

// TestACLRequiredOutsideDev: a tier example without its acl section refuses
// to start and says what to write; with "acl: disabled" it starts and warns.
func TestACLRequiredOutsideDev(t *testing.T) {
	for _, c := range fileCases(t, "global-1.yaml") {
		cfg, err := localize(c.config, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		expectConfigError(t, c.args, withSection(t, cfg, "acl", ""), `acl: is required outside 'strata dev': give acl: {enabled: true}`)
		d := start(t, c.args, withSection(t, cfg, "acl", "disabled"))
		testutil.Until(t, "the no-token warning", 20*time.Second, func() bool {
			return strings.Contains(d.stderr.String(), "warning: acl: disabled: the Admin API at")
		})
	}
}
