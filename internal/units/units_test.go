package units

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestParseQuantity(t *testing.T) {
	good := map[string]float64{
		"16": 16, "0.5": 0.5, ".5": 0.5, "512Mi": 512 << 20, "2G": 2e9, "2 Gi": 2 << 30,
		"1e3": 1000, "1.5k": 1500, "3K": 3000, "1T": 1e12, "1Ti": 1 << 40, " 7 ": 7, "0": 0,
	}
	for in, want := range good {
		if got, err := ParseQuantity(in); err != nil || got != want {
			t.Errorf("ParseQuantity(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "1e400", "1e300T", "NaN", ".nan", "Inf", "1 Mb", "2g", "0x10", "1,5"} {
		if v, err := ParseQuantity(in); err == nil {
			t.Errorf("ParseQuantity(%q) = %v, want an error", in, v)
		} else if !strings.HasPrefix(err.Error(), QuantityRule) {
			t.Errorf("ParseQuantity(%q): %v does not say the rule", in, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"500ms": 500 * time.Millisecond, "2s": 2 * time.Second, "1m30s": 90 * time.Second,
		"0": 0, " 0 ": 0, "2h": 2 * time.Hour, "1.5s": 1500 * time.Millisecond,
	}
	for in, want := range good {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "-1", "-5s", "50", "0.5", "1e10", "1e400", "NaN", "Inf", "ten minutes", "3 days", "9999999999h"} {
		if v, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, v)
		} else if !strings.HasPrefix(err.Error(), DurationRule) {
			t.Errorf("ParseDuration(%q): %v does not say the rule", in, err)
		}
	}
}

func TestYAML(t *testing.T) {
	var v struct {
		Q Quantity `yaml:"q"`
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("q: 2Gi\nd: 1m\n"), &v); err != nil || v.Q != 2<<30 || v.D.D() != time.Minute {
		t.Fatalf("got %+v, %v", v, err)
	}
	for in, want := range map[string]string{
		"q: [1]\n":     "line 1: " + QuantityRule,
		"d: {a: 1}\n":  "line 1: " + DurationRule,
		"q: 1\nd: x\n": `line 2: ` + DurationRule + `, got "x"`,
	} {
		err := yaml.Unmarshal([]byte(in), &v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
