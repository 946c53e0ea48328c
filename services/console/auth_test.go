package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/auth"
)

// login logs in with token and returns the session cookie and its CSRF
// token.
func (f *fixture) login(t *testing.T, token string) (*http.Cookie, string) {
	t.Helper()
	resp := f.do(t, "POST", "/api/login", "", "application/json", strings.NewReader(`{"token":"`+token+`"}`))
	cookies := resp.Cookies()
	var sess sessionView
	decode(t, resp, http.StatusOK, &sess)
	for _, c := range cookies {
		if c.Name == auth.SessionCookie {
			return c, sess.CSRFToken
		}
	}
	t.Fatalf("login set no %s cookie: %v", auth.SessionCookie, cookies)
	return nil, ""
}

// withSession sends a request carrying cookie (and csrf when not empty).
func (f *fixture) withSession(t *testing.T, method, path string, cookie *http.Cookie, csrf string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(cookie)
	if csrf != "" {
		req.Header.Set(auth.CSRFHeader, csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestLogoutRevokesTheSession: after logout the cookie is refused, even
// sent again by someone who kept a copy, by this console and by another
// replica on the same database; another session of the same token lives on.
func TestLogoutRevokesTheSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cookie, csrf := f.login(t, adminToken)
	other, _ := f.login(t, adminToken)
	decode(t, f.withSession(t, "GET", "/api/tasks", cookie, ""), http.StatusOK, nil)

	resp := f.withSession(t, "POST", "/api/logout", cookie, csrf)
	decode(t, resp, http.StatusNoContent, nil)
	var e apiError
	decode(t, f.withSession(t, "GET", "/api/tasks", cookie, ""), http.StatusUnauthorized, &e)
	if !strings.Contains(e.Message, "logged out") {
		t.Errorf("refusal of a logged-out session: %+v", e)
	}
	decode(t, f.withSession(t, "POST", "/api/uploads", cookie, csrf), http.StatusUnauthorized, nil)
	replica := setup(t)
	replica.srv.pool = f.pool
	replica.http = newHTTPServer(t, replica.srv.Handler()) // the gate reads the sessions logged out in f's database
	decode(t, replica.withSession(t, "GET", "/api/tasks", cookie, ""), http.StatusUnauthorized, nil)
	decode(t, f.withSession(t, "GET", "/api/tasks", other, ""), http.StatusOK, nil)

	// Logging out with a bearer token has no session to end.
	decode(t, f.do(t, "POST", "/api/logout", adminToken, "", nil), http.StatusNoContent, nil)
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM console_revoked_sessions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d revoked sessions (%v), want 1", n, err)
	}
}

// TestAuthorizationSchemeIgnoresCase: the scheme of the Authorization
// header is case-insensitive (RFC 7235); another scheme or a wrong token
// is refused.
func TestAuthorizationSchemeIgnoresCase(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for header, want := range map[string]int{
		"Bearer " + readToken:     http.StatusOK,
		"bearer " + readToken:     http.StatusOK,
		"BEARER " + readToken:     http.StatusOK,
		"bEaReR   " + readToken:   http.StatusOK,
		"Basic " + readToken:      http.StatusUnauthorized,
		"Bearer" + readToken:      http.StatusUnauthorized,
		"bearer wrong-token-0123": http.StatusUnauthorized,
		"bearer":                  http.StatusUnauthorized,
	} {
		req, _ := http.NewRequest("GET", f.http.URL+"/api/tasks", nil)
		req.Header.Set("Authorization", header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", strings.Replace(header, readToken, "<token>", 1), resp.StatusCode, want)
		}
	}
}

// TestErrorsAreCappedAndInAPITerms: an error repeats no huge value of the
// request whole, and names the API's parameters, never dubctl's flags.
func TestErrorsAreCappedAndInAPITerms(t *testing.T) {
	t.Parallel()
	f := setup(t)
	huge := strings.Repeat("a", 100<<10)
	for _, c := range []struct {
		path string
		want int
		says string
	}{
		{"/api/tasks/" + huge, http.StatusBadRequest, "want a UUID"},
		{"/api/tasks/" + huge + "/segments", http.StatusBadRequest, "want a UUID"},
		{"/api/dead-letters/" + huge, http.StatusBadRequest, "want a positive number"},
		{"/api/tasks?status=" + huge, http.StatusBadRequest, "want one of queued"},
		{"/api/nothing/" + huge, http.StatusNotFound, "no such API route"},
	} {
		var e apiError
		decode(t, f.do(t, "GET", c.path, adminToken, "", nil), c.want, &e)
		if n := utf8.RuneCountInString(e.Message); n > 300 || !strings.Contains(e.Message, "a…") ||
			!strings.Contains(e.Message, c.says) {
			t.Errorf("GET %.40s…: %d characters: %.200q", c.path, n, e.Message)
		}
	}

	var e apiError
	decode(t, f.do(t, "GET", "/api/dead-letters?since=yesterday", adminToken, "", nil), http.StatusBadRequest, &e)
	if strings.Contains(e.Message, "--") || !strings.Contains(e.Message, `since "yesterday"`) {
		t.Errorf("bad since: %q, want the API's parameter named", e.Message)
	}
	id := f.insertTask(t, "failed", time.Now())
	env, _ := wire.New(wire.StepASR, id, "trace", payloadOf("asr", id))
	body, _ := env.Marshal()
	var dl int64
	if err := f.pool.QueryRow(context.Background(), `INSERT INTO dead_letters (message_id, task_id, step, attempt,
		failure_reason, original_message, replayed_at) VALUES ('m1', $1, 'asr', 1, 'engine down', $2, now())
		RETURNING id`, id, body).Scan(&dl); err != nil {
		t.Fatal(err)
	}
	resp := f.do(t, "POST", "/api/dead-letters/"+itoa(dl)+"/replay", adminToken, "application/json", strings.NewReader(`{}`))
	decode(t, resp, http.StatusConflict, &e)
	if strings.Contains(e.Message, "--") || !strings.Contains(e.Message, "forced replay") {
		t.Errorf("replay of a replayed dead letter: %q, want no CLI flag named", e.Message)
	}
}
