package adminview

import (
	"strings"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	tree := func(leader, state string, alerts ...string) []*Instance {
		return []*Instance{{Tier: "region", Instance: "r1", LeaderID: leader, Alerts: alerts, Children: []*Child{{ID: "h1", State: state, Connected: true}, {ID: "h2", State: "active", Connected: true}}}}
	}
	prev := &Snapshot{At: time.Unix(0, 0), Roots: tree("r1-1", "active"), Owners: map[string]map[string]string{"region/r1": {"s/1": "h1", "s/2": "h1", "s/3": ""}}}
	cur := &Snapshot{At: time.Unix(1, 0), Roots: tree("r1-2", "draining", "no_capacity: full"), Owners: map[string]map[string]string{"region/r1": {"s/1": "h2", "s/2": "→h2", "s/3": "h1"}}}
	var got []string
	for _, e := range Diff(prev, cur) {
		got = append(got, e.Kind+": "+e.Message)
	}
	want := []string{
		"leader: region r1: leader r1-2 (was r1-1, term 0)",
		"alert: region r1: ALERT no_capacity: full",
		"child_state: region r1: h1 is draining (was active)",
		"move: region r1: s/1 moved h1 → h2",
		"move: region r1: s/3 placed on h1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if Diff(nil, cur) != nil {
		t.Error("the first view yields events")
	}
}
