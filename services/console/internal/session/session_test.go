package session

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/rs/zerolog"
)

const adminToken = "admin-token-0123456789abcdef"

// room is a session room on the configuration's admin token, its
// failures kept in failed.
func room(perMinute, burst int, failed *error) Room {
	return Room{Auth: auth.New(auth.Config{APIToken: adminToken, Session: 3600e9}), Log: zerolog.Nop(),
		Logins: ratelimit.New(perMinute, burst), Refused: &auditlog.Refusals{},
		Fail: func(_ http.ResponseWriter, _ *http.Request, err error) { *failed = err }}
}

// handler is the room's route method path.
func handler(t *testing.T, s Room, method, path string) http.HandlerFunc {
	t.Helper()
	for _, rt := range s.Routes() {
		if rt.Method == method && rt.Path == path {
			return rt.Handle
		}
	}
	t.Fatalf("no route %s %s", method, path)
	return nil
}

// TestLoginSetsTheSessionAndItsCSRFCookie: a known token logs in (the
// session cookie HttpOnly, the CSRF cookie readable by the page, both
// SameSite=Strict) and the answer names the role and the CSRF token; an
// unknown token is 401 "unknown token"; past the rate limit 429 with
// Retry-After.
func TestLoginSetsTheSessionAndItsCSRFCookie(t *testing.T) {
	t.Parallel()
	var failed error
	s := room(6000, 1000, &failed)
	login := handler(t, s, "POST", "/api/login")
	w := httptest.NewRecorder()
	login(w, httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token": "`+adminToken+`"}`)))
	cookies := map[string]*http.Cookie{}
	for _, c := range w.Result().Cookies() {
		cookies[c.Name] = c
	}
	sess, csrf := cookies[auth.SessionCookie], cookies[auth.CSRFCookie]
	if failed != nil || w.Code != http.StatusOK || sess == nil || csrf == nil || !sess.HttpOnly || csrf.HttpOnly ||
		sess.SameSite != http.SameSiteStrictMode || !strings.Contains(w.Body.String(), `"csrfToken":"`+csrf.Value+`"`) ||
		!strings.Contains(w.Body.String(), `"role":"admin"`) {
		t.Fatalf("login: %v %d %v %s", failed, w.Code, cookies, w.Body)
	}
	login(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token": "nope-0123456789abcdef"}`)))
	if ae, ok := apierr.As(failed); !ok || ae.Status != http.StatusUnauthorized || ae.Message != "unknown token" {
		t.Errorf("unknown token: %v, want 401 unknown token", failed)
	}
	limited := room(1, 1, &failed)
	login = handler(t, limited, "POST", "/api/login")
	login(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/login", strings.NewReader(`{}`)))
	w = httptest.NewRecorder()
	login(w, httptest.NewRequest("POST", "/api/login", strings.NewReader(`{}`)))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "rate_limited") {
		t.Errorf("second login at 1 a minute: %d %v %s", w.Code, w.Header(), w.Body)
	}
}

// TestSessionAnswersThePrincipal: GET /api/session names who the request
// acts as, with the CSRF token of its session cookie.
func TestSessionAnswersThePrincipal(t *testing.T) {
	t.Parallel()
	var failed error
	s := room(10, 5, &failed)
	value, _ := s.Auth.NewSession("admin", auth.RoleAdmin)
	r := route.WithPrincipal(httptest.NewRequest("GET", "/api/session", nil),
		auth.Principal{Role: auth.RoleAdmin, Name: "admin", Session: value})
	w := httptest.NewRecorder()
	handler(t, s, "GET", "/api/session")(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"csrfToken":"`+s.Auth.CSRFToken(value)+`"`) ||
		!strings.Contains(w.Body.String(), `"name":"admin"`) {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}
