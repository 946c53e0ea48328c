// Package session is the routes that log in and out and tell the page who
// it is: a token exchanged for a session cookie and its CSRF token
// (internal/auth signs both), login attempts rate-limited per client
// address (internal/ratelimit), a session ended on every replica at logout.
package session

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Room serves the session routes.
type Room struct {
	Auth *auth.Auth
	// Pool holds the sessions logged out (console_revoked_sessions).
	Pool *pgxpool.Pool
	Log  zerolog.Logger
	// Logins bounds the login attempts of each client address.
	Logins *ratelimit.Limiter
	// Refused counts the logins refused by the rate limit.
	Refused *auditlog.Refusals
	Fail    route.Fail
}

// Routes are the session's routes; logging in and out is audited.
func (s Room) Routes() []route.Route {
	return []route.Route{
		{Method: "POST", Path: "/api/login", Access: route.Public, Audit: "login", Handle: s.login},
		{Method: "GET", Path: "/api/session", Access: route.Reader, Handle: s.session},
		{Method: "POST", Path: "/api/logout", Access: route.Reader, Audit: "logout", Handle: s.logout},
	}
}

// View is what login and GET /api/session answer.
type View struct {
	Role string `json:"role"`
	Name string `json:"name,omitempty"`
	// Project is a project's token's project; "" for an admin or reader
	// across every project.
	Project   string    `json:"project"`
	CSRFToken string    `json:"csrfToken,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// login exchanges a token for a session cookie. Only a JSON body is
// accepted (the route's document requires one: the gate answers 415 for
// any other), so that a cross-site form cannot log a browser in. Attempts
// are rate-limited per client address (CONSOLE_LOGIN_PER_MINUTE, burst
// CONSOLE_LOGIN_BURST): 429 with Retry-After past the limit.
func (s Room) login(w http.ResponseWriter, r *http.Request) {
	if ok, wait := s.Logins.Allow(ratelimit.ClientAddr(r)); !ok {
		// Counted with the refused requests, not one audit row each.
		auditlog.Skip(r)
		s.Refused.Note(auditlog.Refusal{Target: r.Method + " " + r.URL.Path, Outcome: "rate_limited: too many login attempts",
			Status: http.StatusTooManyRequests}, time.Now(), apierr.CutEcho(r.URL.Path))
		tooManyLogins(w, wait)
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := jsonbody.Decode(r, &body); err != nil {
		s.Fail(w, r, err)
		return
	}
	role, name, p, err := s.Auth.LoginAs(r.Context(), body.Token)
	auditlog.NoteActor(r, p.Name, p.Role)
	if err != nil {
		if e, ok := err.(*apierr.Error); ok && e.Status == http.StatusUnauthorized {
			err = apierr.Unauthorized("unknown token")
		}
		s.Fail(w, r, err)
		return
	}
	value, exp := s.Auth.NewSession(name, role)
	secure := r.TLS != nil
	http.SetCookie(w, &http.Cookie{Name: auth.SessionCookie, Value: value, Path: "/", Expires: exp,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	csrf := s.Auth.CSRFToken(value)
	http.SetCookie(w, &http.Cookie{Name: auth.CSRFCookie, Value: csrf, Path: "/", Expires: exp,
		Secure: secure, SameSite: http.SameSiteStrictMode})
	route.JSON(w, http.StatusOK, View{Role: p.Role, Name: p.Name, Project: p.Project, CSRFToken: csrf, ExpiresAt: exp.UTC()})
}

// tooManyLogins answers 429 with Retry-After in whole seconds.
func tooManyLogins(w http.ResponseWriter, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	route.JSON(w, http.StatusTooManyRequests, &apierr.Error{Code: "rate_limited",
		Message: "too many login attempts from this address; retry after " + strconv.Itoa(max(secs, 1)) + " s"})
}

// logout ends the request's session: its cookie value is revoked
// server-side (console_revoked_sessions, until the cookie would have
// expired), so that a copy of the cookie is refused by every replica from
// now on, and the cookies are cleared. Rotating the tokens or
// CONSOLE_SESSION_KEY still ends every session at once. A request
// authenticated by a bearer token has no session: only the cookies are
// cleared.
func (s Room) logout(w http.ResponseWriter, r *http.Request) {
	if p := route.PrincipalOf(r); p.Session != "" {
		if err := auth.Revoke(r.Context(), s.Pool, p.Session, p.Expires); err != nil {
			s.Log.Error().Err(err).Msg("logout")
			s.Fail(w, r, apierr.Unavailable("the session could not be ended now; try again"))
			return
		}
	}
	for _, name := range []string{auth.SessionCookie, auth.CSRFCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: name == auth.SessionCookie, SameSite: http.SameSiteStrictMode})
	}
	w.WriteHeader(http.StatusNoContent)
}

// session tells the page who it is and its CSRF token after a reload.
func (s Room) session(w http.ResponseWriter, r *http.Request) {
	p := route.PrincipalOf(r)
	v := View{Role: p.Role, Name: p.Name, Project: p.Project}
	if p.Session != "" {
		v.CSRFToken, v.ExpiresAt = s.Auth.CSRFToken(p.Session), p.Expires.UTC()
	}
	route.JSON(w, http.StatusOK, v)
}
