package gate

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/rs/zerolog"
)

const (
	adminToken = "admin-token-0123456789abcdef"
	readToken  = "read-token-0123456789abcdef"
)

// doc is a contract of the routes the tests serve.
const doc = `{"paths": {
	"/api/things": {"get": {"x-scope": "project"}, "post": {"x-scope": "project"}},
	"/api/open": {"get": {"x-scope": "project"}},
	"/api/system": {"get": {"x-scope": "system"}}}}`

// served is a gate serving three routes whose handlers answer the
// principal's name, without a database.
func served(t *testing.T) *httptest.Server {
	t.Helper()
	c, err := contract.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g := Gate{Auth: auth.New(auth.Config{APIToken: adminToken, ReadToken: readToken}), Log: zerolog.Nop(), Contract: c,
		Audit: auditlog.Log{Refused: &auditlog.Refusals{}}, BodyLimit: func(*contract.Op, *http.Request) int64 { return 1 << 10 }}
	who := func(w http.ResponseWriter, r *http.Request) { route.JSON(w, http.StatusOK, route.PrincipalOf(r).Name) }
	hs := httptest.NewServer(g.Handler([]route.Route{
		{Method: "GET", Path: "/api/things", Access: route.Reader, Handle: who},
		{Method: "POST", Path: "/api/things", Access: route.Admin, Handle: who},
		{Method: "GET", Path: "/api/open", Access: route.Public, Handle: who},
		{Method: "GET", Path: "/api/system", Access: route.Reader, Handle: who},
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestGateAuthenticatesAuthorizesAndAnswersNoRoute: a route runs for a
// principal who may call it, as that principal; no token is 401, a
// read-only token on an admin route 403; a path served with other methods
// is 405 with Allow, a path with a dot segment 400, and anything else 404.
func TestGateAuthenticatesAuthorizesAndAnswersNoRoute(t *testing.T) {
	t.Parallel()
	hs := served(t)
	for _, c := range []struct {
		method, path, token string
		want                int
		body, allow         string
	}{
		{"GET", "/api/things", adminToken, 200, `"admin"`, ""},
		{"GET", "/api/system", adminToken, 200, `"admin"`, ""},
		{"GET", "/api/things", readToken, 200, `"read"`, ""},
		{"GET", "/api/things", "", 401, "log in", ""},
		{"POST", "/api/things", readToken, 403, "read-only", ""},
		{"POST", "/api/things", adminToken, 200, `"admin"`, ""},
		{"GET", "/api/open", "", 200, `""`, ""},
		{"DELETE", "/api/open", "", 405, "this path answers", "GET, HEAD"},
		{"DELETE", "/api/things", "", 401, "log in", "GET, HEAD, POST"},
		{"DELETE", "/api/things", adminToken, 405, "", "GET, HEAD, POST"},
		{"GET", "/api/x/%2e%2e/things", adminToken, 400, "segments", ""},
		{"GET", "/api/nothing", adminToken, 404, "no such API route", ""},
	} {
		req, _ := http.NewRequest(c.method, hs.URL+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.Contains(string(b), c.body) || resp.Header.Get("Allow") != c.allow ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s (%q): %d %q Allow %q, want %d with %q, Allow %q", c.method, c.path, c.token, resp.StatusCode,
				b, resp.Header.Get("Allow"), c.want, c.body, c.allow)
		}
	}
}

// TestClassifyAnswersTheSharedPackagesErrors: an API error is answered as
// it is, a missing task or dead letter 404 with its text, a dead letter
// replayed already 409, anything else 500 without its detail.
func TestClassifyAnswersTheSharedPackagesErrors(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]apierr.Error{
		apierr.BadRequest("bad"):                          {Status: 400, Code: "bad_request", Message: "bad"},
		fmt.Errorf("task x: %w", view.ErrNotFound):        {Status: 404, Code: "not_found", Message: "task x: " + view.ErrNotFound.Error()},
		fmt.Errorf("dead letter 1: %w", dlq.ErrNotFound):  {Status: 404, Code: "not_found", Message: "dead letter 1: " + dlq.ErrNotFound.Error()},
		fmt.Errorf("dead letter 1: %w", dlq.ErrReplayed):  {Status: 409, Code: "conflict", Message: "dead letter 1: " + dlq.ErrReplayed.Error()},
		errors.New("connection refused on 10.0.0.1:5432"): {Status: 500, Code: "internal", Message: "internal error"},
	} {
		if got := *Classify(err); got != want {
			t.Errorf("%v: %+v, want %+v", err, got, want)
		}
	}
}
