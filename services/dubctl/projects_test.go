package main

import (
	"encoding/json"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestProjectsAndTokensInBothModes: dubctl project create|list and token
// create|list|revoke work in both modes with the same JSON and the same
// refusals; a token made by either door works against the console, is
// listed without its secret, and once revoked by either door is refused by
// the console at its next request.
func TestProjectsAndTokensInBothModes(t *testing.T) {
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}
	for mode, id := range map[string]string{"database": "studio-db", "console": "studio-api"} {
		m.use(t, mode)
		if out, stderr, code := run(t, "project", "create", id, "--daily-shared-minutes", "30"); code != 0 || out != "project "+id+" created\n" {
			t.Fatalf("%s mode: project create: exit %d %q %q", mode, code, out, stderr)
		}
	}
	list := m.sameJSON(t, 0, nil, "project", "list", "--json").([]any)
	if len(list) != 3 { // default, and the two
		t.Fatalf("project list: %v", list)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"project", "create", "Bad Id"}, cli.ExitUsage, `project id "Bad Id": want 1..63 of a-z 0-9 _ -`},
		{[]string{"project", "create", "studio-db"}, cli.ExitFailed, "exists already: project studio-db"},
		{[]string{"token", "create", "--project", "nope", "--name", "x", "--role", "read"}, cli.ExitFailed, "not found: project nope"},
		{[]string{"token", "create", "--project", "studio-db", "--name", "x", "--role", "owner"}, cli.ExitUsage, `role "owner": want admin, operator or read`},
		{[]string{"token", "create", "--project", "studio-db", "--name", "x", "--role", "read", "--expires", "400d"}, cli.ExitUsage, "want at most 366 days from now"},
	} {
		res := m.both(t, c.args...)
		for _, mode := range modeNames {
			if r := res[mode]; r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s mode: %v: exit %d %q, want %d and %q", mode, c.args, r.code, r.stderr, c.code, c.want)
			}
		}
	}
	secrets := map[string]string{}
	ids := map[string]string{}
	for _, mode := range modeNames {
		m.use(t, mode)
		out, stderr, code := run(t, "token", "create", "--project", "studio-db", "--name", "ci-"+mode, "--role", "operator", "--expires", "30d", "--json")
		var c struct {
			ID, Token, Role string
		}
		if code != 0 || json.Unmarshal([]byte(out), &c) != nil || !strings.HasPrefix(c.Token, "dft_") || c.Role != "operator" {
			t.Fatalf("%s mode: token create: exit %d %q %q", mode, code, out, stderr)
		}
		secrets[mode], ids[mode] = c.Token, c.ID
	}
	tokens := m.sameJSON(t, 0, nil, "token", "list", "--project", "studio-db", "--json").([]any)
	raw, _ := json.Marshal(tokens)
	if len(tokens) != 2 || strings.Contains(string(raw), "dft_") {
		t.Fatalf("token list: %s", raw)
	}
	for mode, secret := range secrets {
		if got := sessionProject(t, m.console, secret); got != http.StatusOK {
			t.Fatalf("the token made in %s mode: GET /api/session %d", mode, got)
		}
	}
	// Revoked by either door: refused by the console at once.
	m.use(t, "database")
	if _, stderr, code := run(t, "token", "revoke", ids["console"]); code != 0 {
		t.Fatalf("revoke in database mode: %s", stderr)
	}
	m.use(t, "console")
	if _, stderr, code := run(t, "token", "revoke", ids["database"]); code != 0 {
		t.Fatalf("revoke in console mode: %s", stderr)
	}
	for mode, secret := range secrets {
		if got := sessionProject(t, m.console, secret); got != http.StatusUnauthorized {
			t.Errorf("the token made in %s mode, revoked: GET /api/session %d, want 401", mode, got)
		}
	}
	m.sameJSON(t, 0, nil, "token", "list", "--project", "studio-db", "--json")
}

// sessionProject sends GET /api/session with token and returns the status.
func sessionProject(t *testing.T, console, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", console+"/api/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
