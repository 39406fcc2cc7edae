package instance

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The CSV form: hosts.csv and shards.csv, each with a header row. Columns
// other than the fixed ones name a resource: cap.R (a host's capacity of R),
// dev.R (a host's devices of R, "count×each", e.g. 8x1.0) and load.R (a
// shard's load of R). Lists (allowed) are separated by ';', labels are
// "k=v;k=v". An empty cell is absent (0 for a number).
var (
	hostColumns  = []string{"id", "region", "rack", "state", "labels"}
	shardColumns = []string{"id", "job", "state_bytes", "pin", "allowed", "region", "rack", "labels", "anti_affinity", "current"}
)

type csvTable struct {
	file   string
	header []string
	rows   [][]string
	lines  []int
}

func readCSV(r io.Reader, file string, fixed []string, prefixes ...string) (*csvTable, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	t := &csvTable{file: file}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &Error{File: file, Line: 1, Rule: "needs a header row"}
	}
	if err != nil {
		return nil, csvErr(err, file)
	}
	seen := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		line, _ := cr.FieldPos(i)
		if j, dup := seen[h]; dup {
			return nil, &Error{File: file, Line: line, Field: "column " + strconv.Quote(h), Rule: fmt.Sprintf("is repeated (columns %d and %d)", j+1, i+1)}
		}
		seen[h] = i
		ok := false
		for _, f := range fixed {
			ok = ok || h == f
		}
		for _, p := range prefixes {
			if name, found := strings.CutPrefix(h, p); found && name != "" {
				ok = true
			}
		}
		if !ok {
			return nil, &Error{File: file, Line: line, Field: "column " + strconv.Quote(h),
				Rule: fmt.Sprintf("unknown column (known: %s, and %s followed by a resource name)", strings.Join(fixed, ", "), strings.Join(prefixes, " or "))}
		}
	}
	if _, ok := seen["id"]; !ok {
		return nil, &Error{File: file, Line: 1, Field: "column \"id\"", Rule: "is required"}
	}
	t.header = header
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, csvErr(err, file)
		}
		line, _ := cr.FieldPos(0)
		t.rows = append(t.rows, rec)
		t.lines = append(t.lines, line)
	}
}

func csvErr(err error, file string) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &Error{File: file, Line: pe.Line, Rule: pe.Err.Error()}
	}
	return &Error{File: file, Rule: err.Error()}
}

func parseNumber(cell string) (float64, string) {
	v, err := strconv.ParseFloat(cell, 64)
	if err != nil {
		return 0, fmt.Sprintf("must be a number (got %q)", cell)
	}
	if why := number(v); why != "" {
		return 0, why
	}
	return v, ""
}

func parseLabels(cell string) (map[string]string, string) {
	if cell == "" {
		return nil, ""
	}
	out := map[string]string{}
	for _, kv := range strings.Split(cell, ";") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Sprintf("must be key=value pairs separated by ';' (got %q)", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Sprintf("label %q is repeated", k)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, ""
}

func parseList(cell string) []string {
	if cell == "" {
		return nil
	}
	var out []string
	for _, x := range strings.Split(cell, ";") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// ReadCSV reads an instance from its hosts and shards CSV files (the CSV
// form; package doc). The names name the sources in errors.
func ReadCSV(hosts io.Reader, hostsName string, shards io.Reader, shardsName string) (*Instance, error) {
	ht, err := readCSV(hosts, hostsName, hostColumns, "cap.", "dev.")
	if err != nil {
		return nil, err
	}
	in := &Instance{}
	for i, rec := range ht.rows {
		h := Host{Line: ht.lines[i], Capacity: map[string]float64{}}
		for j, col := range ht.header {
			cell := strings.TrimSpace(rec[j])
			fail := func(rule string) error {
				return &Error{File: hostsName, Line: h.Line, Field: "column " + col, Rule: rule}
			}
			switch {
			case col == "id":
				h.ID = cell
			case col == "region":
				h.Region = cell
			case col == "rack":
				h.Rack = cell
			case col == "state":
				st, why := parseState(cell)
				if why != "" {
					return nil, fail(why)
				}
				h.State = st
			case col == "labels":
				l, why := parseLabels(cell)
				if why != "" {
					return nil, fail(why)
				}
				h.Labels = l
			case cell == "":
			case strings.HasPrefix(col, "cap."):
				v, why := parseNumber(cell)
				if why != "" {
					return nil, fail(why)
				}
				h.Capacity[col[4:]] = v
			case strings.HasPrefix(col, "dev."):
				d, why := parseDevice(cell)
				if why != "" {
					return nil, fail(why)
				}
				if h.Devices == nil {
					h.Devices = map[string]Device{}
				}
				h.Devices[col[4:]] = d
			}
		}
		in.Hosts = append(in.Hosts, h)
	}
	st, err := readCSV(shards, shardsName, shardColumns, "load.")
	if err != nil {
		return nil, err
	}
	for i, rec := range st.rows {
		s := Shard{Line: st.lines[i], Load: map[string]float64{}}
		for j, col := range st.header {
			cell := strings.TrimSpace(rec[j])
			fail := func(rule string) error {
				return &Error{File: shardsName, Line: s.Line, Field: "column " + col, Rule: rule}
			}
			switch {
			case col == "id":
				s.ID = cell
			case col == "job":
				s.Job = cell
			case col == "pin":
				s.Pin = cell
			case col == "allowed":
				s.Allowed = parseList(cell)
			case col == "region":
				s.Region = cell
			case col == "rack":
				s.Rack = cell
			case col == "current":
				s.Current = cell
			case col == "labels":
				l, why := parseLabels(cell)
				if why != "" {
					return nil, fail(why)
				}
				s.Labels = l
			case col == "anti_affinity":
				name, limit, why := parseGroup(cell)
				if why != "" {
					return nil, fail(why)
				}
				s.AntiAffinity, s.MaxPerHost = name, limit
			case cell == "":
			case col == "state_bytes":
				v, err := strconv.ParseInt(cell, 10, 64)
				if err != nil || v < 0 {
					return nil, fail(fmt.Sprintf("must be a whole number ≥ 0 (got %q)", cell))
				}
				s.StateBytes = v
			case strings.HasPrefix(col, "load."):
				v, why := parseNumber(cell)
				if why != "" {
					return nil, fail(why)
				}
				s.Load[col[5:]] = v
			}
		}
		in.Shards = append(in.Shards, s)
	}
	if err := in.check(hostsName, shardsName); err != nil {
		return nil, err
	}
	return in, nil
}

// Load reads an instance from path: a .json file, or a directory holding
// hosts.csv and shards.csv.
func Load(path string) (*Instance, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	if fi.IsDir() {
		hp, sp := filepath.Join(path, "hosts.csv"), filepath.Join(path, "shards.csv")
		hf, err := os.Open(hp)
		if err != nil {
			return nil, fmt.Errorf("instance: a directory must hold hosts.csv and shards.csv: %w", err)
		}
		defer hf.Close()
		sf, err := os.Open(sp)
		if err != nil {
			return nil, fmt.Errorf("instance: a directory must hold hosts.csv and shards.csv: %w", err)
		}
		defer sf.Close()
		return ReadCSV(hf, hp, sf, sp)
	}
	if !strings.HasSuffix(path, ".json") {
		return nil, fmt.Errorf("instance %s: must be a .json file or a directory holding hosts.csv and shards.csv", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	defer f.Close()
	return ReadJSON(f, path)
}
