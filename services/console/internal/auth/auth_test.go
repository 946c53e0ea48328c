package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

const (
	adminToken = "admin-token-0123456789abcdef"
	readToken  = "read-token-0123456789abcdef"
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef"
)

func TestNamedTokensAreChecked(t *testing.T) {
	t.Parallel()
	for list, want := range map[string]string{
		"alice:" + aliceToken:                                "",
		"alice:" + aliceToken + ":readonly, bob:" + bobToken: "",
		"alice":                          "want name:token",
		"alice:short":                    "at least 16",
		"al.ice:" + aliceToken:           "name",
		"alice:" + aliceToken + ":admin": "want name:token",
		"alice:" + aliceToken + ",alice:" + bobToken: "twice",
		"admin:" + aliceToken:                        "single admin",
		"x:" + adminToken:                            "same token",
	} {
		err := ValidateTokens(adminToken, "", list)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", list, err, want)
		}
	}
	if err := ValidateTokens("", "", ""); err == nil {
		t.Error("no token at all was accepted")
	}
	if err := ValidateTokens("", "", "ops:"+aliceToken); err != nil {
		t.Errorf("named tokens alone: %v", err)
	}
}

// status is the HTTP status err answers (0 for none).
func status(err error) int {
	if ae, ok := apierr.As(err); ok {
		return ae.Status
	}
	return 0
}

// TestBearerTokensAreNamed: each configured token is its name and role,
// whatever the scheme's case; an unknown one, or another scheme, is 401.
func TestBearerTokensAreNamed(t *testing.T) {
	t.Parallel()
	a := New(Config{APIToken: adminToken, ReadToken: readToken, APITokens: "alice:" + aliceToken + ":readonly"})
	for h, want := range map[string]Principal{
		"Bearer " + adminToken:  {Role: RoleAdmin, Name: "admin"},
		"bearer " + readToken:   {Role: RoleRead, Name: "read"},
		"BEARER  " + aliceToken: {Role: RoleRead, Name: "alice"},
	} {
		r := httptest.NewRequest("GET", "/api/tasks", nil)
		r.Header.Set("Authorization", h)
		p, err := a.Authenticate(r)
		if err != nil || p != want {
			t.Errorf("%q: %+v %v, want %+v", h, p, err, want)
		}
	}
	for _, h := range []string{"Bearer nope-nope-nope-nope", "Basic " + adminToken, "Bearer "} {
		r := httptest.NewRequest("GET", "/api/tasks", nil)
		r.Header.Set("Authorization", h)
		if _, err := a.Authenticate(r); status(err) != http.StatusUnauthorized {
			t.Errorf("%q: %v, want a 401", h, err)
		}
	}
}

// TestSessionsAreSignedExpireAndNeedCSRF: a session cookie is its token's
// name and role until it expires; a changed cookie is refused, and a
// write with the cookie needs the session's CSRF token.
func TestSessionsAreSignedExpireAndNeedCSRF(t *testing.T) {
	t.Parallel()
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	a := New(Config{APIToken: adminToken, Session: time.Hour})
	a.now = clock.Now
	role, name, _, err := a.LoginAs(context.Background(), adminToken)
	if err != nil || role != RoleAdmin || name != "admin" {
		t.Fatalf("login: %s %s %v", role, name, err)
	}
	value, exp := a.NewSession(name, role)
	if !exp.Equal(clock.Now().Add(time.Hour)) {
		t.Fatalf("expires %v, want in an hour", exp)
	}
	req := func(method, cookie, csrf string) (Principal, error) {
		r := httptest.NewRequest(method, "/api/tasks", nil)
		r.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
		if csrf != "" {
			r.Header.Set(CSRFHeader, csrf)
		}
		return a.Authenticate(r)
	}
	if p, err := req("GET", value, ""); err != nil || p.Role != RoleAdmin || p.Session != value {
		t.Fatalf("GET with the session: %+v %v", p, err)
	}
	if _, err := req("POST", value, ""); status(err) != http.StatusForbidden {
		t.Fatalf("POST without CSRF: %v, want a 403", err)
	}
	if _, err := req("POST", value, a.CSRFToken(value)); err != nil {
		t.Fatalf("POST with CSRF: %v", err)
	}
	forged := strings.Replace(value, "admin.", "read.", 1)
	if _, err := req("GET", forged, ""); status(err) != http.StatusUnauthorized {
		t.Fatalf("a changed cookie: %v, want a 401", err)
	}
	clock.Advance(time.Hour)
	if _, err := req("GET", value, ""); status(err) != http.StatusUnauthorized {
		t.Fatalf("an expired session: %v, want a 401", err)
	}
	if _, _, _, err := a.LoginAs(context.Background(), "nope-nope-nope-nope"); status(err) != http.StatusUnauthorized {
		t.Fatalf("login with an unknown token (no store): %v, want a 401", err)
	}
}

// TestProjectPrincipalsActWithinTheirProject: a project's operator acts,
// its reader does not, and only an admin manages tokens.
func TestProjectPrincipalsActWithinTheirProject(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p                   Principal
		global, act, manage bool
	}{
		{Principal{Role: RoleAdmin}, true, true, true},
		{Principal{Role: RoleRead}, true, false, false},
		{Principal{Role: RoleOperator}, true, false, false},
		{Principal{Role: RoleOperator, Project: "acme"}, false, true, false},
		{Principal{Role: RoleAdmin, Project: "acme"}, false, true, true},
		{Principal{Role: RoleRead, Project: "acme"}, false, false, false},
	} {
		if c.p.Global() != c.global || c.p.CanAct() != c.act || c.p.CanManage() != c.manage {
			t.Errorf("%+v: global %v act %v manage %v, want %v %v %v", c.p, c.p.Global(), c.p.CanAct(), c.p.CanManage(),
				c.global, c.act, c.manage)
		}
	}
}
