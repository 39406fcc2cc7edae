package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLIBasics(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		outHas string
		errHas string
	}{
		{[]string{"--help"}, 0, "Available Commands", ""},
		{[]string{}, 0, "Usage:", ""},
		{[]string{"version"}, 0, "strata ", ""},
		{[]string{"--version"}, 0, "strata dev (go", ""},
		{[]string{"nosuchcommand"}, 2, "", `unknown command "nosuchcommand"`},
		{[]string{"version", "--bogus"}, 2, "", "unknown flag: --bogus"},
		{[]string{"version", "extra"}, 2, "", `unknown command "extra"`},
		{[]string{"version", "-o", "xml"}, 2, "", `--output: must be one of table, json (got "xml")`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(out, tt.outHas) {
				t.Errorf("stdout %q lacks %q", out, tt.outHas)
			}
			if !strings.Contains(errOut, tt.errHas) {
				t.Errorf("stderr %q lacks %q", errOut, tt.errHas)
			}
		})
	}
}

func TestVersionJSON(t *testing.T) {
	code, out, _ := runCLI("version", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var v versionJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if v.Version == "" || v.Go == "" {
		t.Errorf("missing fields: %+v", v)
	}
}
