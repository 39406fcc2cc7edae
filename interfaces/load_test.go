package interfaces

import (
	"math"
	"reflect"
	"testing"
)

func TestLoadArithmetic(t *testing.T) {
	a := Load{CPU: 2, Mem: 100, Net: 10, Tasks: 3, Extra: map[string]float64{"gpu": 1}}
	b := Load{CPU: 1, Mem: 50, Net: 20, Tasks: 1, Extra: map[string]float64{"disk": 5}}
	tests := []struct {
		name string
		got  Load
		want Load
	}{
		{"add", a.Add(b), Load{CPU: 3, Mem: 150, Net: 30, Tasks: 4, Extra: map[string]float64{"gpu": 1, "disk": 5}}},
		{"sub", a.Sub(b), Load{CPU: 1, Mem: 50, Net: -10, Tasks: 2, Extra: map[string]float64{"gpu": 1, "disk": -5}}},
		{"max", a.Max(b), Load{CPU: 2, Mem: 100, Net: 20, Tasks: 3, Extra: map[string]float64{"gpu": 1, "disk": 5}}},
		{"min", a.Min(b), Load{CPU: 1, Mem: 50, Net: 10, Tasks: 1, Extra: map[string]float64{"gpu": 0, "disk": 0}}},
		{"scale", a.Scale(0.5), Load{CPU: 1, Mem: 50, Net: 5, Tasks: 1.5, Extra: map[string]float64{"gpu": 0.5}}},
		{"div", Load{CPU: 1, Mem: 50}.Div(Load{CPU: 4, Mem: 100}), Load{CPU: 0.25, Mem: 0.5}},
		{"div zero capacity, zero load", Load{}.Div(Load{}), Load{}},
		{"sum", Sum(a, b, b), Load{CPU: 4, Mem: 200, Net: 50, Tasks: 5, Extra: map[string]float64{"gpu": 1, "disk": 10}}},
		{"sum of none", Sum(), Load{}},
		{"with builtin", a.With(CPU, 7), Load{CPU: 7, Mem: 100, Net: 10, Tasks: 3, Extra: map[string]float64{"gpu": 1}}},
		{"with extra", Load{}.With("gpu", 2), Load{Extra: map[string]float64{"gpu": 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.got.Equal(tt.want) {
				t.Errorf("got %+v, want %+v", tt.got, tt.want)
			}
		})
	}
}

func TestLoadDivOverflow(t *testing.T) {
	u := Load{CPU: 1}.Div(Load{Mem: 1})
	if !math.IsInf(u.CPU, 1) {
		t.Errorf("demand on a resource with no capacity: got %v, want +Inf", u.CPU)
	}
}

func TestLoadDoesNotAlias(t *testing.T) {
	a := Load{Extra: map[string]float64{"gpu": 1}}
	b := a.With("gpu", 5)
	c := a.Add(Load{})
	c.Extra["gpu"] = 9
	if a.Extra["gpu"] != 1 || b.Extra["gpu"] != 5 {
		t.Errorf("arithmetic aliased the receiver: a=%v b=%v", a.Extra, b.Extra)
	}
}

func TestLoadFitsAndZero(t *testing.T) {
	c := Load{CPU: 4, Mem: 8, Extra: map[string]float64{"gpu": 1}}
	tests := []struct {
		l    Load
		fits bool
	}{
		{Load{CPU: 4, Mem: 8}, true},
		{Load{CPU: 4.01}, false},
		{Load{Net: 1}, false},
		{Load{Extra: map[string]float64{"gpu": 1}}, true},
		{Load{Extra: map[string]float64{"gpu": 2}}, false},
		{Load{Extra: map[string]float64{"tpu": 1}}, false},
	}
	for _, tt := range tests {
		if got := tt.l.Fits(c); got != tt.fits {
			t.Errorf("%+v.Fits(%+v) = %v, want %v", tt.l, c, got, tt.fits)
		}
	}
	if !(Load{Extra: map[string]float64{"x": 0}}).IsZero() || (Load{Tasks: 1}).IsZero() {
		t.Error("IsZero wrong")
	}
}

func TestLoadNamesAndMaxDim(t *testing.T) {
	l := Load{CPU: 0.2, Mem: 0.9, Extra: map[string]float64{"zz": 0.1, "aa": 0.95}}
	if got, want := l.Names(), []Resource{CPU, Mem, Net, Tasks, "aa", "zz"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if r, v := l.MaxDim(); r != "aa" || v != 0.95 {
		t.Errorf("MaxDim = %s %v, want aa 0.95", r, v)
	}
	if r, _ := (Load{CPU: 1, Mem: 1}).MaxDim(); r != CPU {
		t.Errorf("MaxDim tie = %s, want cpu (earlier wins)", r)
	}
	if got := UnionNames(Load{Extra: map[string]float64{"b": 1}}, Load{Extra: map[string]float64{"a": 1}}); !reflect.DeepEqual(got, []Resource{CPU, Mem, Net, Tasks, "a", "b"}) {
		t.Errorf("UnionNames = %v", got)
	}
	for _, r := range []Resource{CPU, Mem, Net, Tasks, "gpu"} {
		if got := (Load{}).With(r, 3).Get(r); got != 3 {
			t.Errorf("With/Get %s = %v", r, got)
		}
	}
}
