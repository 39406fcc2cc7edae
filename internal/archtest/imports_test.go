package archtest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/strata-sched/strata"

// forbidden maps an import-path prefix to the reason a pure package must not
// depend on it.
var forbidden = map[string]string{
	"google.golang.org/grpc":              "gRPC is I/O; pure packages are driven through the contracts in interfaces",
	"github.com/hashicorp/raft":           "Raft belongs to the coordinator; the simulator replaces it with direct calls",
	"go.etcd.io/bbolt":                    "storage belongs to the coordinator and the host agent",
	"github.com/boltdb/bolt":              "storage belongs to the coordinator and the host agent",
	module + "/coordinator":               "the coordinator imports the pure packages, never the reverse",
	module + "/cmd":                       "commands sit at the top of the graph",
	"google.golang.org/protobuf":          "the wire schema is for the coordinator and the daemons",
	module + "/interfaces/wire":           "the wire schema is for the coordinator and the daemons",
	"github.com/prometheus/client_golang": "metrics are exported by the daemons (coordinator/telemetry), not computed in pure code",
	"github.com/hashicorp/raft-boltdb":    "storage belongs to the coordinator",
}

// pure lists the packages (and their subpackages) that must stay free of I/O
// dependencies. interfaces/wire is the exception DESIGN.md allows: generated code.
// coordinator/tiercore is the pure tier core (issue 21) and coordinator/acl
// the token policies: they live in coordinator but import nothing of it.
var pure = []string{"interfaces", "balancer", "tiers", "sim", "internal/units", "coordinator/acl", "coordinator/tiercore"}

type pkg struct {
	ImportPath string
	Deps       []string
}

func TestImportRules(t *testing.T) {
	args := []string{"list", "-deps=false", "-json=ImportPath,Deps"}
	for _, p := range pure {
		args = append(args, module+"/"+p+"/...")
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	checked := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p.ImportPath, module+"/interfaces/wire") {
			continue // generated wire code may import protobuf and grpc
		}
		checked++
		for _, v := range violations(p) {
			t.Error(v)
		}
	}
	if checked == 0 {
		t.Fatal("no pure packages found: the import rule checked nothing")
	}
}

// violations lists the forbidden dependencies of p, each with the reason.
func violations(p pkg) []string {
	var out []string
	for _, d := range p.Deps {
		if isPure(d) {
			continue // a pure package under coordinator (the tier core): checked itself
		}
		for prefix, why := range forbidden {
			if d == prefix || strings.HasPrefix(d, prefix+"/") {
				out = append(out, p.ImportPath+" depends on "+d+": "+why)
			}
		}
	}
	return out
}

// isPure reports whether import path d is one of the pure packages (or a
// subpackage): those checked by the rule themselves, such as
// coordinator/tiercore, which the simulator runs.
func isPure(d string) bool {
	for _, p := range pure {
		if d == module+"/"+p || strings.HasPrefix(d, module+"/"+p+"/") {
			return true
		}
	}
	return false
}

// TestRuleCatchesViolation proves the rule can fail: a pure package that reached
// grpc, raft, bbolt or the coordinator is reported, one that does not is not.
func TestRuleCatchesViolation(t *testing.T) {
	for _, bad := range []string{"google.golang.org/grpc/codes", "github.com/hashicorp/raft", "go.etcd.io/bbolt", module + "/coordinator"} {
		p := pkg{ImportPath: module + "/balancer", Deps: []string{"fmt", bad}}
		if v := violations(p); len(v) != 1 {
			t.Errorf("dependency on %s: got %d violations, want 1", bad, len(v))
		}
	}
	ok := pkg{ImportPath: module + "/sim", Deps: []string{"fmt", module + "/interfaces", "gonum.org/v1/gonum/optimize", "github.com/hashicorp/raftish", module + "/coordinator/tiercore"}}
	if v := violations(ok); len(v) != 0 {
		t.Errorf("clean package flagged: %v", v)
	}
}
