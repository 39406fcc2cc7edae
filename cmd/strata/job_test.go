package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func TestParseJobSpecGood(t *testing.T) {
	full := `name: wc
parallelism: 3
labels: {team: data}
load:
  cpu: 0.5
  mem: 512Mi
  net: 2k
  tasks: 2
  extra: {gpu: 1, disk: 1Gi}
input_rate: 1500
state_bytes: 1.5Ki
latency_slo: 50ms
constraints:
  pinned: r1
  allowed: [r1, r2]
  labels: {zone: a}
  anti_affinity: wc
  max_per_child: 2
`
	spec, err := parseJobSpec("job.yaml", []byte(full), false)
	if err != nil {
		t.Fatal(err)
	}
	tm := spec.GetShardTemplate()
	checks := []struct {
		name      string
		got, want any
	}{
		{"id", spec.GetId(), "wc"},
		{"parallelism", spec.GetParallelism(), int64(3)},
		{"labels", spec.GetLabels()["team"], "data"},
		{"cpu", tm.GetLoad().GetCpu(), 0.5},
		{"mem", tm.GetLoad().GetMem(), float64(512 << 20)},
		{"net", tm.GetLoad().GetNet(), 2000.0},
		{"tasks", tm.GetLoad().GetTasks(), 2.0},
		{"gpu", tm.GetLoad().GetExtra()["gpu"], 1.0},
		{"disk", tm.GetLoad().GetExtra()["disk"], float64(1 << 30)},
		{"input_rate", tm.GetInputRate(), 1500.0},
		{"state_bytes", tm.GetStateBytes(), int64(1536)},
		{"latency_slo", tm.GetLatencySloNanos(), int64(50 * time.Millisecond)},
		{"pinned", tm.GetConstraints().GetPinned(), "r1"},
		{"allowed", strings.Join(tm.GetConstraints().GetAllowed(), ","), "r1,r2"},
		{"constraint labels", tm.GetConstraints().GetLabels()["zone"], "a"},
		{"anti_affinity", tm.GetConstraints().GetAntiAffinity(), "wc"},
		{"max_per_child", tm.GetConstraints().GetMaxPerChild(), int64(2)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v (%T), want %v (%T)", c.name, c.got, c.got, c.want, c.want)
		}
	}

	// The same job in JSON parses to the same spec.
	js := `{"name": "wc", "parallelism": 3, "labels": {"team": "data"},
	"load": {"cpu": 0.5, "mem": "512Mi", "net": "2k", "tasks": 2, "extra": {"gpu": 1, "disk": "1Gi"}},
	"input_rate": 1500, "state_bytes": "1.5Ki", "latency_slo": "50ms",
	"constraints": {"pinned": "r1", "allowed": ["r1", "r2"], "labels": {"zone": "a"}, "anti_affinity": "wc", "max_per_child": 2}}`
	spec2, err := parseJobSpec("job.json", []byte(js), true)
	if err != nil {
		t.Fatal(err)
	}
	if spec2.String() != spec.String() {
		t.Errorf("JSON and YAML differ:\n%v\n%v", spec2, spec)
	}

	// The minimum: a name and a shard count; the rest is zero.
	minimal, err := parseJobSpec("min.yaml", []byte("name: m\nparallelism: 1\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if minimal.GetParallelism() != 1 || minimal.GetShardTemplate().GetLoad().GetCpu() != 0 || minimal.GetShardTemplate().GetLatencySloNanos() != 0 {
		t.Errorf("minimal job: %v", minimal)
	}
}

func TestParseJobSpecErrors(t *testing.T) {
	base := "name: wc\nparallelism: 2\n"
	tests := []struct {
		name string
		file string
		json bool
		want string // substring of the error
	}{
		{"empty", "", false, "job.yaml: the file is empty"},
		{"not a mapping", "- a\n- b\n", false, "must be a mapping of keys (got a list)"},
		{"unknown top key", base + "paralelism: 3\n", false, `line 3: paralelism: unknown key (known here: name, parallelism`},
		{"unknown load key", base + "load:\n  cpux: 1\n", false, "line 4: load.cpux: unknown key (known here: cpu, mem, net, tasks, extra)"},
		{"unknown constraint key", base + "constraints:\n  pin: r1\n", false, "line 4: constraints.pin: unknown key"},
		{"repeated key", base + "name: again\n", false, "line 3: name: appears twice"},
		{"missing name", "parallelism: 2\n", false, "name: is required"},
		{"missing parallelism", "name: wc\n", false, "parallelism: is required"},
		{"bad name", "name: -wc\nparallelism: 2\n", false, `line 1: name: ` + interfaces.IDRule + ` (got "-wc")`},
		{"name is a list", "name: [a]\nparallelism: 2\n", false, "line 1: name: must be a string (got a list)"},
		{"zero parallelism", "name: wc\nparallelism: 0\n", false, `line 2: parallelism: must be a whole number of shards from 1 to 1048576 (got "0")`},
		{"fractional parallelism", "name: wc\nparallelism: 1.5\n", false, `parallelism: must be a whole number of shards from 1 to 1048576 (got "1.5")`},
		{"huge parallelism", "name: wc\nparallelism: 2000000\n", false, `(got "2000000")`},
		{"negative cpu", base + "load:\n  cpu: -1\n", false, `line 4: load.cpu: must be a number ≥ 0 (cores) (got "-1")`},
		{"text cpu", base + "load:\n  cpu: lots\n", false, `load.cpu: must be a number ≥ 0 (cores) (got "lots")`},
		{"nan cpu", base + "load:\n  cpu: NaN\n", false, `load.cpu: must be a number ≥ 0`},
		{"bad mem unit", base + "load:\n  mem: 2GB\n", false, `line 4: load.mem: must be bytes ≥ 0, a number with an optional unit Ki Mi Gi Ti (×1024) or k K M G T (×1000), like 512Mi or 2G (got "2GB")`},
		{"negative mem", base + "load:\n  mem: -5Mi\n", false, `load.mem: must be bytes ≥ 0`},
		{"bad net", base + "load:\n  net: fast\n", false, `load.net: must be bytes per second ≥ 0`},
		{"negative tasks", base + "load:\n  tasks: -2\n", false, `load.tasks: must be a number ≥ 0 (a count) (got "-2")`},
		{"extra built-in", base + "load:\n  extra: {cpu: 1}\n", false, "load.extra.cpu: is a built-in dimension: set it as load.cpu"},
		{"extra bad value", base + "load:\n  extra:\n    gpu: x\n", false, `line 5: load.extra.gpu: must be a number ≥ 0`},
		{"load not a mapping", base + "load: 3\n", false, `line 3: load: must be a mapping of keys (got "3")`},
		{"negative input rate", base + "input_rate: -1\n", false, `line 3: input_rate: must be a number ≥ 0 (records per second) (got "-1")`},
		{"fractional state bytes", base + "state_bytes: 0.5\n", false, `line 3: state_bytes: must be a whole number of bytes (got "0.5")`},
		{"bad state bytes", base + "state_bytes: big\n", false, `state_bytes: must be a byte count ≥ 0`},
		{"bare number slo", base + "latency_slo: 50\n", false, `line 3: latency_slo: must be a non-negative duration with a unit, such as 500ms, 2s or 1m30s, got "50" (a bare number is ambiguous: add a unit, e.g. 50ms or 50s)`},
		{"negative slo", base + "latency_slo: -1s\n", false, `latency_slo: must be a non-negative duration with a unit`},
		{"empty slo", base + "latency_slo:\n", false, `latency_slo: must be a duration like 50ms or 1s (got empty)`},
		{"allowed not a list", base + "constraints:\n  allowed: r1\n", false, `line 4: constraints.allowed: must be a list of child ids (got "r1")`},
		{"negative max per child", base + "constraints:\n  anti_affinity: g\n  max_per_child: -1\n", false, `line 5: constraints.max_per_child: must be a whole number ≥ 0 (got "-1")`},
		{"max per child without group", base + "constraints:\n  max_per_child: 2\n", false, "line 4: constraints.max_per_child: needs shard.constraints.anti_affinity to name a group (got 2)"},
		{"pinned outside allowed", base + "constraints:\n  pinned: r3\n  allowed: [r1]\n", false, "line 4: constraints.pinned: must be one of shard.constraints.allowed (got r3)"},
		{"bad allowed id", base + "constraints:\n  allowed: [r1, '*']\n", false, `constraints.allowed[1]: ` + interfaces.IDRule},
		{"labels value a list", base + "labels:\n  team: [a]\n", false, "line 4: labels.team: must be a string (got a list)"},
		{"two documents", base + "---\nname: other\n", false, "must hold one document (found a second one)"},
		{"yaml syntax", base + "load: {cpu: 1\n", false, "job.yaml: line"},
		{"json syntax", `{"name": "wc",` + "\n" + `"parallelism": 2,}`, true, "job.yaml: line 2: invalid JSON"},
		{"json trailing value", `{"name": "wc", "parallelism": 2} {}`, true, "must hold one JSON value"},
		{"json unknown key", "{\n\"name\": \"wc\",\n\"parallelism\": 2,\n\"shards\": 4\n}", true, "line 4: shards: unknown key"},
		{"json bad value", "{\"name\": \"wc\", \"parallelism\": 2,\n \"load\": {\"mem\": \"2 lots\"}}", true, `line 2: load.mem: must be bytes ≥ 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := parseJobSpec("job.yaml", []byte(tt.file), tt.json)
			if err == nil {
				t.Fatalf("no error; parsed %v", spec)
			}
			if !errors.Is(err, interfaces.ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\n lacks %q", err, tt.want)
			}
		})
	}
}

// The example shipped in deploy/examples is a valid job, and the cluster's own
// check (wire conversion and ValidateShard of every shard) accepts it.
func TestExampleJobFileIsValid(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "examples", "job.yaml")
	spec, err := readJobFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spec.GetId() == "" || spec.GetParallelism() < 1 {
		t.Fatalf("example: %v", spec)
	}
	tm := spec.GetShardTemplate()
	for i := int64(0); i < spec.GetParallelism(); i++ {
		m := &wire.Shard{Id: fmt.Sprintf("%s/%d", spec.GetId(), i), Job: spec.GetId(), Load: tm.GetLoad(), InputRate: tm.GetInputRate(),
			StateBytes: tm.GetStateBytes(), LatencySloNanos: tm.GetLatencySloNanos(), Constraints: tm.GetConstraints()}
		s, err := wire.ShardFromWire(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := interfaces.ValidateShard(s); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI("job", "submit", "--dry-run", path)
	if code != 0 || !strings.Contains(out, "job wordcount is valid") {
		t.Errorf("dry run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestReadJobFileExtensions(t *testing.T) {
	dir := t.TempDir()
	good := "name: wc\nparallelism: 2\n"
	for _, name := range []string{"a.yaml", "b.YML", "c.json", "d.txt"} {
		body := good
		if strings.HasSuffix(name, "json") {
			body = `{"name": "wc", "parallelism": 2}`
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a.yaml", "b.YML", "c.json"} {
		if _, err := readJobFile(filepath.Join(dir, name), nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := readJobFile(filepath.Join(dir, "d.txt"), nil); err == nil || !strings.Contains(err.Error(), "must end in .yaml, .yml or .json") {
		t.Errorf("d.txt: %v", err)
	}
	// YAML in a .json file is refused: the extension decides the syntax.
	if err := os.WriteFile(filepath.Join(dir, "y.json"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readJobFile(filepath.Join(dir, "y.json"), nil); err == nil || !strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("YAML in .json: %v", err)
	}
	if _, err := readJobFile(filepath.Join(dir, "missing.yaml"), nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	// "-" reads YAML from standard input.
	spec, err := readJobFile("-", strings.NewReader(good))
	if err != nil || spec.GetId() != "wc" {
		t.Errorf("stdin: %v, %v", spec, err)
	}
}

func TestJobCommandsBadInput(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		errHas string
	}{
		{[]string{"job", "submit"}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"job", "submit", "a.yaml", "b.yaml"}, 2, "accepts 1 arg(s), received 2"},
		{[]string{"job", "submit", "--addr", "nonsense", "x.yaml"}, 2, `--addr "nonsense": must be host:port`},
		{[]string{"job", "submit", "--timeout", "0s", "x.yaml"}, 2, "--timeout: must be positive"},
		{[]string{"job", "submit", "-o", "xml", "x.yaml"}, 2, `--output: must be one of table, json (got "xml")`},
		{[]string{"job", "submit", "--dry-run", "nope.yaml"}, 2, "no such file"},
		{[]string{"job", "delete"}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"job", "delete", "bad job"}, 2, "JOB: " + interfaces.IDRule},
		{[]string{"job", "list", "extra"}, 2, `unknown command "extra"`},
		{[]string{"shards", "--job", "a b"}, 2, "--job: " + interfaces.IDRule},
		{[]string{"explain"}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"explain", "s/1", "--limit", "-1"}, 2, "--limit: must be ≥ 0"},
		{[]string{"host", "drain"}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"host", "drain", "h1", "--wait", "-1s"}, 2, "--wait: must be ≥ 0"},
		{[]string{"host", "undrain", "h1", "--wait", "1s"}, 2, "unknown flag: --wait"},
		{[]string{"status", "--addr", ""}, 2, `--addr "": must be host:port`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(errOut, tt.errHas) {
				t.Errorf("stderr %q lacks %q", errOut, tt.errHas)
			}
		})
	}
}

// A job pinned (or allowed) only to children the top tier does not have is
// accepted — a child may join later — with a warning that its shards wait.
func TestUnknownChildWarnings(t *testing.T) {
	spec := func(pinned string, allowed ...string) *wire.JobSpec {
		return &wire.JobSpec{Id: "j", Parallelism: 1, ShardTemplate: &wire.Shard{Constraints: &wire.ShardConstraints{Pinned: pinned, Allowed: allowed}}}
	}
	ids := []string{"region-1", "region-2"}
	if w := unknownChildWarnings(spec("region-1"), "global", ids); len(w) != 0 {
		t.Errorf("pinned to a child: %q", w)
	}
	if w := unknownChildWarnings(spec("", "region-9", "region-2"), "global", ids); len(w) != 0 {
		t.Errorf("allowed with one child: %q", w)
	}
	w := unknownChildWarnings(spec("region-9"), "global", ids)
	if len(w) != 1 || !strings.Contains(w[0], `constraints.pinned: "region-9" is not a child of the global tier`) || !strings.Contains(w[0], "region-1, region-2") {
		t.Errorf("pinned to a missing child: %q", w)
	}
	w = unknownChildWarnings(spec("", "x", "y"), "global", ids)
	if len(w) != 1 || !strings.Contains(w[0], "constraints.allowed: none of x, y") {
		t.Errorf("allowed only missing children: %q", w)
	}
}
