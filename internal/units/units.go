package units

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// QuantityRule and DurationRule say what a value must be; errors end with them.
const (
	QuantityRule = "must be a non-negative number with an optional unit (Ki, Mi, Gi, Ti, k, K, M, G, T), like 512Mi or 2G"
	DurationRule = "must be a non-negative duration with a unit, such as 500ms, 2s or 1m30s"
)

var quantityRe = regexp.MustCompile(`^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(Ki|Mi|Gi|Ti|K|M|G|T|k)?$`)

var quantityUnits = map[string]float64{
	"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
}

// ParseQuantity reads "16", "0.5", "512Mi", "2G", "1e3".
func ParseQuantity(s string) (float64, error) {
	m := quantityRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%s, got %q", QuantityRule, s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err == nil {
		v *= quantityUnits[m[2]]
	}
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s, got %q (out of range)", QuantityRule, s)
	}
	return v, nil
}

// ParseDuration reads "500ms", "2s", "1m30s" or "0". A bare number other than
// 0 is refused: "50" could mean milliseconds or seconds, and a latency target
// or a lease read the wrong way is worse than an error.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(t, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if v == 0 && err == nil {
			return 0, nil
		}
		return 0, fmt.Errorf("%s, got %q (a bare number is ambiguous: add a unit, e.g. %[2]sms or %[2]ss)", DurationRule, s, t)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		if strings.Contains(err.Error(), "overflow") {
			return 0, fmt.Errorf("%s, got %q (out of range: at most about 292 years)", DurationRule, s)
		}
		return 0, fmt.Errorf("%s, got %q", DurationRule, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s, got %q", DurationRule, s)
	}
	return d, nil
}

// Quantity is a YAML scalar read with ParseQuantity.
type Quantity float64

// UnmarshalYAML reads a quantity; the error names the line.
func (q *Quantity) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s", n.Line, QuantityRule)
	}
	v, err := ParseQuantity(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*q = Quantity(v)
	return nil
}

// Duration is a YAML scalar read with ParseDuration.
type Duration time.Duration

// UnmarshalYAML reads a duration; the error names the line.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s", n.Line, DurationRule)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
