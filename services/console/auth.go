package main

import (
	"net/http"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
)

// Who calls is the auth room's (internal/auth); the routes that log in and
// out are here.

// principal is who a request acts as.
type principal = auth.Principal

// newAuth returns the auth of cfg's tokens and session settings.
func newAuth(cfg *Config) *auth.Auth {
	return auth.New(auth.Config{APIToken: cfg.APIToken, ReadToken: cfg.ReadToken, APITokens: cfg.APITokens,
		SessionKey: cfg.SessionKey, Session: cfg.Session()})
}

// sessionView is what login and GET /api/session answer.
type sessionView struct {
	Role string `json:"role"`
	Name string `json:"name,omitempty"`
	// Project is a project's token's project; "" for an admin or reader
	// across every project.
	Project   string    `json:"project"`
	CSRFToken string    `json:"csrfToken,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// login exchanges a token for a session cookie. Only a JSON body is
// accepted (the route's document requires one: guard answers 415 for any
// other), so that a cross-site form cannot log a browser in. Attempts are
// rate-limited per client address (CONSOLE_LOGIN_PER_MINUTE, burst
// CONSOLE_LOGIN_BURST): 429 with Retry-After past the limit.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if ok, wait := s.logins.Allow(ratelimit.ClientAddr(r)); !ok {
		// Counted with the refused requests, not one audit row each.
		auditlog.Skip(r)
		s.refused.Note(auditlog.Refusal{Target: r.Method + " " + r.URL.Path, Outcome: "rate_limited: too many login attempts",
			Status: http.StatusTooManyRequests}, time.Now(), apierr.CutEcho(r.URL.Path))
		tooManyLogins(w, wait)
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := jsonbody.Decode(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	role, name, p, err := s.auth.LoginAs(r.Context(), body.Token)
	auditlog.NoteActor(r, p.Name, p.Role)
	if err != nil {
		if e, ok := err.(*apiError); ok && e.Status == http.StatusUnauthorized {
			err = apierr.Unauthorized("unknown token")
		}
		s.fail(w, r, err)
		return
	}
	value, exp := s.auth.NewSession(name, role)
	secure := r.TLS != nil
	http.SetCookie(w, &http.Cookie{Name: auth.SessionCookie, Value: value, Path: "/", Expires: exp,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	csrf := s.auth.CSRFToken(value)
	http.SetCookie(w, &http.Cookie{Name: auth.CSRFCookie, Value: csrf, Path: "/", Expires: exp,
		Secure: secure, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, sessionView{Role: p.Role, Name: p.Name, Project: p.Project, CSRFToken: csrf, ExpiresAt: exp.UTC()})
}

// logout ends the request's session: its cookie value is revoked
// server-side (console_revoked_sessions, until the cookie would have
// expired), so that a copy of the cookie is refused by every replica from
// now on, and the cookies are cleared. Rotating the tokens or
// CONSOLE_SESSION_KEY still ends every session at once. A request
// authenticated by a bearer token has no session: only the cookies are
// cleared.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if p := principalOf(r); p.Session != "" {
		if err := auth.Revoke(r.Context(), s.pool, p.Session, p.Expires); err != nil {
			s.log.Error().Err(err).Msg("logout")
			s.fail(w, r, apierr.Unavailable("the session could not be ended now; try again"))
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
func (s *server) session(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	v := sessionView{Role: p.Role, Name: p.Name, Project: p.Project}
	if p.Session != "" {
		v.CSRFToken, v.ExpiresAt = s.auth.CSRFToken(p.Session), p.Expires.UTC()
	}
	writeJSON(w, http.StatusOK, v)
}
