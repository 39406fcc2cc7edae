package yamlerr

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

type dur struct{ v string }

func (d *dur) UnmarshalYAML(n *yamlNode) error {
	if n.Value != "1s" {
		return lineErr(n.Line, `must be a duration such as 1s, got "`+n.Value+`"`)
	}
	d.v = n.Value
	return nil
}

type item struct {
	Name string  `yaml:"name"`
	On   bool    `yaml:"on"`
	W    float64 `yaml:"w"`
	Tags []string
}

type cfg struct {
	Count   int `yaml:"count"`
	Control struct {
		Interval dur  `yaml:"interval"`
		Max      uint `yaml:"max_moves"`
	} `yaml:"control"`
	Items []item           `yaml:"items"`
	Caps  map[string]int   `yaml:"caps"`
	Opt   *struct{ X int } `yaml:"opt"`
}

func TestDecodeNamesLineAndKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"count: abc\n", `f.yaml:1: count: must be an integer, got "abc"`},
		{"count: 1\ncontrol:\n  max_moves: -3\n", `f.yaml:3: control.max_moves: must be a non-negative integer, got "-3"`},
		{"control:\n  interval: 5x\n", `f.yaml:2: control.interval: must be a duration such as 1s, got "5x"`},
		{"bogus: 1\n", `f.yaml:1: bogus: unknown key (known here: count, control, items, caps, opt)`},
		{"items:\n  - {name: a, w: 2}\n  - {name: b, wx: 2}\n", `f.yaml:3: items[1].wx: unknown key (known here: name, on, w, tags)`},
		{"items:\n  - {name: a, on: 3, w: x}\n", `f.yaml:2: items[0].on: must be true or false, got "3"; f.yaml:2: items[0].w: must be a number, got "x"`},
		{"items:\n  - {name: [1, 2]}\n", `f.yaml:2: items[0].name: must be a string, got a list`},
		{"caps: {cpu: lots}\n", `f.yaml:1: caps.cpu: must be an integer, got "lots"`},
		{"count: 1\ncount: 2\n", `f.yaml:2: count: is given twice (first at line 1)`},
		{"opt: {X: y}\n", `f.yaml:1: opt.X: unknown key (known here: x)`},
		{"items: 3\n", `f.yaml:1: items: must be a list, got "3"`},
		{"count: [\n", `f.yaml:1: not valid YAML: did not find expected node content`},
		{"", `f.yaml: the file is empty`},
	} {
		var v cfg
		err := Decode("f.yaml", []byte(c.in), &v)
		if err == nil {
			t.Errorf("%q: no error, want %s", c.in, c.want)
			continue
		}
		if !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%q: %v does not wrap ErrInvalid", c.in, err)
		}
		if got := err.Error(); got != c.want+": "+interfaces.ErrInvalid.Error() {
			t.Errorf("%q:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	var v cfg
	if err := Decode("f.yaml", []byte("count: 2\ncontrol: {interval: 1s, max_moves: 4}\nitems: [{name: a, tags: [x]}]\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.Count != 2 || v.Control.Max != 4 || v.Control.Interval.v != "1s" || len(v.Items) != 1 || v.Items[0].Tags[0] != "x" {
		t.Errorf("decoded %+v", v)
	}
}

func TestNonFinite(t *testing.T) {
	var v cfg
	if _, _, ok := NonFinite(&v); ok {
		t.Fatal("zero value reported non-finite")
	}
	for in, want := range map[string]string{
		"items: [{name: a, w: 1}, {name: b, w: .nan}]\n": "items[1].w",
		"items: [{name: a, w: -.inf}]\n":                 "items[0].w",
	} {
		var v cfg
		if err := Decode("f.yaml", []byte(in), &v); err != nil {
			t.Fatal(err)
		}
		path, _, ok := NonFinite(&v)
		if !ok || Key(path) != want {
			t.Errorf("%q: %v %v, want %s", in, path, ok, want)
		}
	}
	type withMap struct {
		M map[string]struct {
			X float64 `yaml:"x"`
		} `yaml:"m"`
	}
	var w withMap
	if err := Decode("f.yaml", []byte("m: {b: {x: 1}, a: {x: .inf}}\n"), &w); err != nil {
		t.Fatal(err)
	}
	if path, val, ok := NonFinite(&w); !ok || Key(path) != "m.a.x" || !math.IsInf(val, 1) {
		t.Errorf("map: %v %v %v", path, val, ok)
	}
}

// An inline map takes any key; a bad value under it is explained without
// reflection on a struct that is not there.
func TestInlineMap(t *testing.T) {
	var v struct {
		A    int            `yaml:"a"`
		Rest map[string]int `yaml:",inline"`
	}
	err := Decode("f.yaml", []byte("a: 1\nb: x\n"), &v)
	if err == nil || !strings.Contains(err.Error(), "f.yaml:2: b:") {
		t.Fatalf("got %v", err)
	}
}
