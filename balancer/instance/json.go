package instance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/strata-sched/strata/interfaces"
)

type jsonHost struct {
	ID       string             `json:"id"`
	Region   string             `json:"region"`
	Rack     string             `json:"rack"`
	State    string             `json:"state"`
	Labels   map[string]string  `json:"labels"`
	Capacity map[string]float64 `json:"capacity"`
	Devices  map[string]Device  `json:"devices"`
}

type jsonShard struct {
	ID           string             `json:"id"`
	Job          string             `json:"job"`
	Load         map[string]float64 `json:"load"`
	StateBytes   int64              `json:"state_bytes"`
	Pin          string             `json:"pin"`
	Allowed      []string           `json:"allowed"`
	Region       string             `json:"region"`
	Rack         string             `json:"rack"`
	Labels       map[string]string  `json:"labels"`
	AntiAffinity string             `json:"anti_affinity"`
	Current      string             `json:"current"`
}

// ReadJSON reads an instance in the JSON form: an object with "hosts" and
// "shards", each an array of objects (package doc). file names the source in
// errors.
func ReadJSON(r io.Reader, file string) (*Instance, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &Error{File: file, Rule: err.Error()}
	}
	lineAt := func(off int64) int {
		if off > int64(len(data)) {
			off = int64(len(data))
		}
		return 1 + bytes.Count(data[:off], []byte("\n"))
	}
	fail := func(off int64, field, rule string) error {
		return &Error{File: file, Line: lineAt(off), Field: field, Rule: rule}
	}
	if err := checkDuplicateKeys(data); err != nil {
		var de *dupErr
		if errors.As(err, &de) {
			return nil, fail(de.off, de.key, "key is repeated")
		}
		return nil, syntaxErr(err, file, lineAt)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(err, file, lineAt)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fail(dec.InputOffset(), "", "must be a JSON object with \"hosts\" and \"shards\"")
	}
	in := &Instance{}
	seen := map[string]bool{}
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(err, file, lineAt)
		}
		key := keyTok.(string)
		seen[key] = true
		switch key {
		case "hosts", "shards":
		default:
			return nil, fail(dec.InputOffset(), key, "unknown key (known: hosts, shards)")
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(err, file, lineAt)
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return nil, fail(dec.InputOffset(), key, "must be an array of objects")
		}
		for i := 0; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, syntaxErr(err, file, lineAt)
			}
			start := dec.InputOffset() - int64(len(raw))
			line := lineAt(start)
			field := fmt.Sprintf("%s[%d]", key, i)
			if key == "hosts" {
				var h jsonHost
				if err := strictDecode(raw, &h); err != nil {
					return nil, decodeErr(err, file, field, start, lineAt)
				}
				host := Host{ID: h.ID, Region: h.Region, Rack: h.Rack, Labels: h.Labels, Capacity: h.Capacity, Devices: h.Devices, Line: line}
				st, why := parseState(h.State)
				if why != "" {
					return nil, &Error{File: file, Line: line, Field: field + ".state", Rule: why}
				}
				host.State = st
				in.Hosts = append(in.Hosts, host)
				continue
			}
			var s jsonShard
			if err := strictDecode(raw, &s); err != nil {
				return nil, decodeErr(err, file, field, start, lineAt)
			}
			name, limit, why := parseGroup(s.AntiAffinity)
			if why != "" {
				return nil, &Error{File: file, Line: line, Field: field + ".anti_affinity", Rule: why}
			}
			in.Shards = append(in.Shards, Shard{ID: s.ID, Job: s.Job, Load: s.Load, StateBytes: s.StateBytes, Pin: s.Pin,
				Allowed: s.Allowed, Region: s.Region, Rack: s.Rack, Labels: s.Labels, AntiAffinity: name, MaxPerHost: limit,
				Current: s.Current, Line: line})
		}
		if _, err := dec.Token(); err != nil {
			return nil, syntaxErr(err, file, lineAt)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxErr(err, file, lineAt)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(dec.InputOffset(), "", "unexpected data after the instance object")
	}
	if !seen["hosts"] {
		return nil, &Error{File: file, Field: "hosts", Rule: "is required"}
	}
	if err := in.check(file, file); err != nil {
		return nil, err
	}
	return in, nil
}

func parseState(s string) (interfaces.ChildState, string) {
	switch s {
	case "", "active":
		return interfaces.ChildActive, ""
	case "draining":
		return interfaces.ChildDraining, ""
	case "failed":
		return interfaces.ChildFailed, ""
	}
	return 0, fmt.Sprintf("must be active, draining or failed (got %q)", s)
}

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeErr names the line and field of a decoding error inside the element
// that starts at start.
func decodeErr(err error, file, field string, start int64, lineAt func(int64) int) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		f := field
		if te.Field != "" {
			f += "." + te.Field
		}
		rule := fmt.Sprintf("must be a %s (got a JSON %s)", kindName(te.Type.String()), te.Value)
		return &Error{File: file, Line: lineAt(start + te.Offset), Field: f, Rule: rule}
	case errors.As(err, &se):
		return &Error{File: file, Line: lineAt(start + se.Offset), Field: field, Rule: se.Error()}
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return &Error{File: file, Line: lineAt(start), Field: field, Rule: msg}
}

func kindName(t string) string {
	switch t {
	case "float64":
		return "number"
	case "int64", "int":
		return "whole number"
	case "string":
		return "string"
	}
	return t
}

func syntaxErr(err error, file string, lineAt func(int64) int) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &Error{File: file, Line: lineAt(se.Offset), Rule: "invalid JSON: " + se.Error()}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &Error{File: file, Rule: "invalid JSON: unexpected end of file"}
	}
	return &Error{File: file, Rule: "invalid JSON: " + err.Error()}
}

type dupErr struct {
	key string
	off int64
}

func (e *dupErr) Error() string { return "repeated key " + e.key }

// checkDuplicateKeys walks the document and reports the first object key
// repeated within one object (encoding/json would silently keep the last).
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are checked where they are decoded
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next token in an object is a key
		path   string
	}
	var stack []*frame
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return &dupErr{key: top.path + k, off: off}
				}
				top.keys[k] = true
				top.expect = false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		}
		// a value ended: the enclosing object expects a key next
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expect = true
		}
	}
}
