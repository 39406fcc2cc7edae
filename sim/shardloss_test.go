package sim

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestCollaborativeLocalLosesNoShard is issue 24's lost shard: the
// collab-vs-decoupled scenario with the daemons' default solver (local). A hot
// clicks partition (9.6 cpu) is larger than every edge host (8 cpu); before
// the fix the edge region named it in no hint (coop.ChildHints ignored
// capacity), and once the global tier had moved it from core to edge an
// anti-bounce rule kept it from going back, so it ran nowhere for the rest of
// the run.
func TestCollaborativeLocalLosesNoShard(t *testing.T) {
	src, err := os.ReadFile("scenarios/collab-vs-decoupled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(src), "solver: greedy", "solver: local")
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "kind: versus") && !strings.Contains(l, "kind: slo") {
			keep = append(keep, l)
		}
	}
	sc, err := ParseScenario([]byte(strings.Join(keep, "\n")), "collab-vs-decoupled-local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, Options{Policies: []string{"collaborative"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report(sc)
	for _, a := range rep.Failed() {
		t.Errorf("%s: %s", a.Policy, a.Message)
	}
	if u := res.Policies[0].Summary.Unowned; u != 0 {
		t.Errorf("%d shards run nowhere at the end", u)
	}
}
