package tierd

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-sched/strata/coordinator/acl"
)

// With ACLs on, the dashboard's page loads without a token, but its API
// answers only a page that sends a read token, checked by the Admin API.
func TestDashboardBehindTokens(t *testing.T) {
	d := startACL(t, func(c *Config) { c.HTTPAddr = "127.0.0.1:0" })
	get := func(path, secret string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.HTTPAddr()+path, nil)
		if secret != "" {
			req.Header.Set("Authorization", acl.Bearer(secret))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, body := get("/ui/", ""); c != http.StatusOK || !strings.Contains(body, "<title>Strata</title>") {
		t.Errorf("/ui/ without a token: %d", c)
	}
	if c, body := get("/ui/api/state", testBootstrap); c != http.StatusOK || !strings.Contains(body, `"tree"`) {
		t.Errorf("/ui/api/state with the bootstrap token: %d %s", c, body)
	}
	for _, secret := range []string{"", "strata_wrong-token-0123456789abcdef"} {
		if c, body := get("/ui/api/state", secret); c != http.StatusUnauthorized {
			t.Errorf("/ui/api/state with token %q: %d %s, want 401", secret, c, body)
		}
	}
}
