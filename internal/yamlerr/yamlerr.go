package yamlerr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/strata-sched/strata/interfaces"
)

// Decode decodes data, the contents of the file name, into v (a pointer),
// refusing unknown keys. On failure the error (wrapping interfaces.ErrInvalid)
// lists every problem the decoder found as "name:LINE: KEY: rule", joined by
// "; ". An empty file is an error too.
func Decode(name string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: the file is empty: %w", name, interfaces.ErrInvalid)
	}
	return Explain(name, data, v, err)
}

var (
	lineMsg      = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type `)
	badValue     = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into ")
	badNode      = regexp.MustCompile(`^cannot unmarshal !!(\w+) into `)
	duplicate    = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
	quoted       = regexp.MustCompile(`"([^"]*)"`)
)

// Explain rewrites err, an error from decoding data (the file name) into v,
// as Decode does.
func Explain(name string, data []byte, v any, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		root = yaml.Node{} // a syntax error: no tree to find keys in
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = explainOne(name, &root, reflect.TypeOf(v), m, te == nil)
	}
	return fmt.Errorf("%s: %w", strings.Join(out, "; "), interfaces.ErrInvalid)
}

// hint says which node on a line a message is about.
type hint struct {
	key   string // a mapping key with this name
	value string // a scalar with this value
	kind  string // a node of this YAML kind: "seq", "map"
}

func explainOne(name string, root *yaml.Node, t reflect.Type, m string, syntax bool) string {
	mm := lineMsg.FindStringSubmatch(strings.TrimSpace(m))
	if mm == nil {
		return fmt.Sprintf("%s: %s", name, strings.TrimPrefix(m, "yaml: "))
	}
	line, _ := strconv.Atoi(mm[1])
	rest := mm[2]
	if syntax && strings.HasPrefix(m, "yaml: ") {
		return fmt.Sprintf("%s:%d: not valid YAML: %s", name, line, rest)
	}
	// Which node the message is about (h), and the rule once its path and
	// Go type are known (explain); other messages (a custom unmarshaler's)
	// keep their text and may quote the value.
	var h hint
	explain := func(path []any) string { return rest }
	if s := unknownField.FindStringSubmatch(rest); s != nil {
		h.key = s[1]
		explain = func(path []any) string {
			if keys := keysOf(typeAt(t, path[:max(len(path)-1, 0)])); len(keys) > 0 {
				return "unknown key (known here: " + strings.Join(keys, ", ") + ")"
			}
			return "unknown key"
		}
	} else if s := badValue.FindStringSubmatch(rest); s != nil {
		h.value = s[2]
		explain = func(path []any) string {
			return fmt.Sprintf("must be %s, got %q", want(typeAt(t, path), rest), h.value)
		}
	} else if s := badNode.FindStringSubmatch(rest); s != nil {
		h.kind = s[1]
		explain = func(path []any) string {
			return fmt.Sprintf("must be %s, got a %s", want(typeAt(t, path), rest), map[string]string{"seq": "list", "map": "mapping"}[h.kind])
		}
	} else if s := duplicate.FindStringSubmatch(rest); s != nil {
		h.key = s[1]
		explain = func([]any) string { return "is given twice (first at line " + s[2] + ")" }
	} else if q := quoted.FindStringSubmatch(rest); q != nil {
		h.value = q[1]
	}
	path := find(root, line, h)
	rule := explain(path)
	if len(path) == 0 {
		return fmt.Sprintf("%s:%d: %s", name, line, rule)
	}
	return fmt.Sprintf("%s:%d: %s: %s", name, line, Key(path), rule)
}

// want describes what a value of type t must be; rest is the decoder's message
// (its target type, for a type reflection did not find).
func want(t reflect.Type, rest string) string {
	if t == nil {
		_, target, _ := strings.Cut(rest, " into ")
		return "a " + target
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a " + t.String()
}

// find returns the path (keys and list indices) of the node on line that h
// describes, the deepest match; nil when none.
func find(root *yaml.Node, line int, h hint) []any {
	var best []any
	var walk func(n *yaml.Node, path []any)
	consider := func(n *yaml.Node, path []any, key *yaml.Node) {
		switch {
		case h.key != "":
			if key != nil && key.Line == line && key.Value == h.key {
				best = append([]any(nil), path...)
			}
		case h.kind != "":
			if n.Line == line && ((h.kind == "seq" && n.Kind == yaml.SequenceNode) || (h.kind == "map" && n.Kind == yaml.MappingNode)) {
				best = append([]any(nil), path...)
			}
		default:
			if n.Kind == yaml.ScalarNode && n.Line == line && (h.value == "" || n.Value == h.value) {
				best = append([]any(nil), path...)
			}
		}
	}
	walk = func(n *yaml.Node, path []any) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := append(path[:len(path):len(path)], k.Value)
				consider(v, p, k)
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := append(path[:len(path):len(path)], i)
				consider(c, p, nil)
				walk(c, p)
			}
		}
	}
	walk(root, nil)
	if best == nil && h != (hint{}) {
		// The hint matched nothing (a message quoting a transformed value):
		// take any scalar on the line.
		return find(root, line, hint{})
	}
	return best
}

// typeAt is the Go type path leads to from t, or nil.
func typeAt(t reflect.Type, path []any) reflect.Type {
	for _, p := range path {
		t = deref(t)
		if t == nil {
			return nil
		}
		switch k := p.(type) {
		case int:
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		case string:
			switch t.Kind() {
			case reflect.Map:
				t = t.Elem()
			case reflect.Struct:
				f, ok := field(t, k)
				if !ok {
					return nil
				}
				t = f
			default:
				return nil
			}
		}
	}
	return deref(t)
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// field is the type of struct t's field with YAML key k (inline fields
// included).
func field(t reflect.Type, k string) (reflect.Type, bool) {
	if t == nil || t.Kind() != reflect.Struct {
		return nil, false // e.g. an inline map: any key, no type to name
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, inline := yamlName(f)
		if inline {
			if ft, ok := field(deref(f.Type), k); ok {
				return ft, true
			}
			continue
		}
		if name == k {
			return f.Type, true
		}
	}
	return nil, false
}

// keysOf lists the YAML keys of struct t in declaration order; nil for other
// types.
func keysOf(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, inline := yamlName(f)
		switch {
		case inline:
			out = append(out, keysOf(deref(f.Type))...)
		case name != "":
			out = append(out, name)
		}
	}
	return out
}

// yamlName is the key of field f as yaml.v3 sees it ("" when not decoded).
func yamlName(f reflect.StructField) (name string, inline bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("yaml")
	if tag == "-" {
		return "", false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if strings.Contains(","+opts+",", ",inline,") {
		return "", true
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, false
}

// Key writes a path of keys and list indices as a.b[2].c.
func Key(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch k := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	return b.String()
}

// NonFinite finds the first float field of v (a struct or pointer to one,
// walked in declaration order through nested structs, lists and maps with
// string keys, as YAML names them) holding NaN or ±Inf: its path (for Key and
// line lookups) and value. ok is false when every float is finite. A
// decoded file can hold ".nan" or ".inf" in any float key; no key of Strata's
// files means anything by them.
func NonFinite(v any) (path []any, val float64, ok bool) {
	var walk func(x reflect.Value, path []any) bool
	walk = func(x reflect.Value, p []any) bool {
		switch x.Kind() {
		case reflect.Pointer, reflect.Interface:
			if x.IsNil() {
				return false
			}
			return walk(x.Elem(), p)
		case reflect.Float32, reflect.Float64:
			if f := x.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
				path, val = p, f
				return true
			}
		case reflect.Struct:
			t := x.Type()
			for i := 0; i < t.NumField(); i++ {
				name, inline := yamlName(t.Field(i))
				switch {
				case inline:
					if walk(x.Field(i), p) {
						return true
					}
				case name != "":
					if walk(x.Field(i), append(p[:len(p):len(p)], name)) {
						return true
					}
				}
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < x.Len(); i++ {
				if walk(x.Index(i), append(p[:len(p):len(p)], i)) {
					return true
				}
			}
		case reflect.Map:
			if x.Type().Key().Kind() != reflect.String {
				return false
			}
			keys := x.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				if walk(x.MapIndex(k), append(p[:len(p):len(p)], k.String())) {
					return true
				}
			}
		}
		return false
	}
	ok = walk(reflect.ValueOf(v), nil)
	return path, val, ok
}
