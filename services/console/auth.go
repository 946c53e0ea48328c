package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/google/uuid"
)

// Roles a token or session grants. The configuration's tokens are admin
// or read across every project; a project's token (pkg/tenant) is admin,
// operator or read within its project (principal.project).
const (
	roleAdmin    = "admin"
	roleRead     = "read"
	roleOperator = tenant.RoleOperator
	// roleProject marks a session made from a project's token: the
	// session names the token's id, and its row (read at every request)
	// gives the project and role, so that a revoked token's sessions end too.
	roleProject = "project"
)

// Names of the session and CSRF cookies and of the CSRF header.
const (
	sessionCookie = "dubflow_session"
	csrfCookie    = "dubflow_csrf"
	csrfHeader    = "X-CSRF-Token"
)

// auth checks bearer tokens and signs and verifies session cookies. It
// holds no state besides its keys, so every replica with the same
// configuration accepts every replica's sessions; the sessions logged out
// are revoked in Postgres (console_revoked_sessions), which every replica
// reads (server.guard).
type auth struct {
	tokens []namedToken
	// store holds the projects' tokens (nil: only the configuration's).
	store store.Querier
	key   []byte
	ttl   time.Duration
	now   func() time.Time
}

func newAuth(cfg *Config) *auth {
	a := &auth{tokens: cfg.configuredTokens(), ttl: cfg.Session(), now: time.Now}
	secret := cfg.SessionKey
	if secret == "" {
		// Derived from every token: rotating a token ends every session.
		secret = cfg.APIToken + "\x00" + cfg.ReadToken + "\x00" + cfg.APITokens
	}
	m := hmac.New(sha256.New, []byte("dubflow-console-session"))
	m.Write([]byte(secret))
	a.key = m.Sum(nil)
	return a
}

func (a *auth) mac(parts ...string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(strings.Join(parts, "|")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns a signed cookie value for the token named name with
// role, and its expiry.
func (a *auth) newSession(name, role string) (string, time.Time) {
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	payload := role + "." + strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(nonce) + "." + name
	return payload + "." + a.mac("session", payload), exp
}

// verifySession returns the principal of a valid, unexpired cookie value
// (a cookie from before tokens had names is named by its role).
func (a *auth) verifySession(v string) (principal, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !hmac.Equal([]byte(v[i+1:]), []byte(a.mac("session", v[:i]))) {
		return principal{}, false
	}
	f := strings.Split(v[:i], ".")
	if len(f) == 3 {
		f = append(f, f[0])
	}
	if len(f) != 4 || (f[0] != roleAdmin && f[0] != roleRead && f[0] != roleProject) {
		return principal{}, false
	}
	sec, err := strconv.ParseInt(f[1], 10, 64)
	exp := time.Unix(sec, 0)
	if err != nil || !a.now().Before(exp) {
		return principal{}, false
	}
	return principal{role: f[0], name: f[3], session: v, expires: exp}, true
}

// csrfToken is the CSRF token bound to a session cookie value.
func (a *auth) csrfToken(session string) string { return a.mac("csrf", session) }

// principal is who a request acts as.
type principal struct {
	role    string
	name    string // the token's name (DUBFLOW_API_TOKENS; "admin" or "read" for the single tokens)
	session string // the cookie value when authenticated by cookie
	expires time.Time
	// project is the project of a project's token; "" for the
	// configuration's tokens, which act across every project.
	project string
	// tokenID is a project's token's id (uuid.Nil for the configuration's).
	tokenID uuid.UUID
}

// global reports whether p acts across every project.
func (p principal) global() bool { return p.project == "" }

// canAct reports whether p may call the routes that change things (access
// admin): an admin across every project, a project's admin or operator.
func (p principal) canAct() bool {
	if p.global() {
		return p.role == roleAdmin
	}
	return p.role == roleAdmin || p.role == roleOperator
}

// canManage reports whether p may manage a project's tokens: an admin
// across every project, or the project's own admin (access manager).
func (p principal) canManage() bool { return p.role == roleAdmin }

// projectPrincipal is who a project's token acts as: named project/name.
func projectPrincipal(t tenant.Token) principal {
	return principal{role: t.Role, name: t.Project + "/" + t.Name, project: t.Project, tokenID: t.ID}
}

// authenticate finds the request's principal: a bearer token first, then
// the session cookie. The scheme of the Authorization header is matched
// without regard to case ("bearer", "BEARER": RFC 7235). A request with the
// cookie that changes state must carry the session's CSRF token in the
// X-CSRF-Token header. Whether the session was logged out is not checked
// here (server.revoked). With an error, the principal is empty, or the
// session's when only the CSRF token is wrong.
func (a *auth) authenticate(r *http.Request) (principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(h), " ")
		tok = strings.TrimSpace(tok)
		name, role := a.lookup(tok)
		if !strings.EqualFold(scheme, "Bearer") {
			return principal{}, apierr.Unauthorized("invalid bearer token")
		}
		if role == "" {
			return a.projectToken(r.Context(), tok)
		}
		return principal{role: role, name: name}, nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return principal{}, apierr.Unauthorized("log in (POST /api/login) or send Authorization: Bearer <token>")
	}
	p, ok := a.verifySession(c.Value)
	if !ok {
		return principal{}, apierr.Unauthorized("session expired or invalid; log in again")
	}
	if p.role == roleProject {
		var err error
		if p, err = a.projectSession(r.Context(), p); err != nil {
			return principal{}, err
		}
	}
	if !safeMethod(r.Method) {
		got := r.Header.Get(csrfHeader)
		if got == "" || !hmac.Equal([]byte(got), []byte(a.csrfToken(c.Value))) {
			// The principal names who was refused (the audit); the
			// request is not served.
			return p, apierr.Forbidden("csrf", "missing or wrong "+csrfHeader+" header")
		}
	}
	return p, nil
}

// projectToken finds the live project's token whose secret is tok.
func (a *auth) projectToken(ctx context.Context, tok string) (principal, error) {
	if a.store == nil || tok == "" {
		return principal{}, apierr.Unauthorized("invalid bearer token")
	}
	t, ok, err := tenant.Lookup(ctx, a.store, tok)
	if err != nil {
		return principal{}, apierr.UnavailableBecause("the token cannot be checked now; try again", err)
	}
	if !ok {
		return principal{}, apierr.Unauthorized("invalid bearer token")
	}
	return projectPrincipal(t), nil
}

// projectSession reads the token a project's session was made from: a
// token revoked or expired since ends its sessions at their next request.
func (a *auth) projectSession(ctx context.Context, p principal) (principal, error) {
	id, err := uuid.Parse(p.name)
	if err != nil || a.store == nil {
		return principal{}, apierr.Unauthorized("session expired or invalid; log in again")
	}
	t, ok, err := tenant.LookupID(ctx, a.store, id)
	if err != nil {
		return principal{}, apierr.UnavailableBecause("the session cannot be checked now; try again", err)
	}
	if !ok {
		return principal{}, apierr.Unauthorized("session ended (its token was revoked or expired); log in again")
	}
	out := projectPrincipal(t)
	out.session, out.expires = p.session, p.expires
	return out, nil
}

// loginAs finds who token is for a login: the configuration's tokens, then
// the projects'. It answers the session's role and name to sign (a
// project's session names its token's id) and the principal.
func (a *auth) loginAs(ctx context.Context, token string) (role, name string, p principal, err error) {
	if name, role := a.lookup(token); role != "" {
		return role, name, principal{role: role, name: name}, nil
	}
	if p, err = a.projectToken(ctx, token); err != nil {
		return "", "", p, err
	}
	return roleProject, p.tokenID.String(), p, nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
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
			Status: http.StatusTooManyRequests}, time.Now(), cutEcho(r.URL.Path))
		tooManyLogins(w, wait)
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := decodeJSON(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	role, name, p, err := s.auth.loginAs(r.Context(), body.Token)
	auditlog.NoteActor(r, p.name, p.role)
	if err != nil {
		if e, ok := err.(*apiError); ok && e.Status == http.StatusUnauthorized {
			err = apierr.Unauthorized("unknown token")
		}
		s.fail(w, r, err)
		return
	}
	value, exp := s.auth.newSession(name, role)
	secure := r.TLS != nil
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: "/", Expires: exp,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	csrf := s.auth.csrfToken(value)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrf, Path: "/", Expires: exp,
		Secure: secure, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, sessionView{Role: p.role, Name: p.name, Project: p.project, CSRFToken: csrf, ExpiresAt: exp.UTC()})
}

// logout ends the request's session: its cookie value is revoked
// server-side (console_revoked_sessions, until the cookie would have
// expired), so that a copy of the cookie is refused by every replica from
// now on, and the cookies are cleared. Rotating the tokens or
// CONSOLE_SESSION_KEY still ends every session at once. A request
// authenticated by a bearer token has no session: only the cookies are
// cleared.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if p := principalOf(r); p.session != "" {
		if err := s.revoke(r.Context(), p.session, p.expires); err != nil {
			s.log.Error().Err(err).Msg("logout")
			s.fail(w, r, apierr.Unavailable("the session could not be ended now; try again"))
			return
		}
	}
	for _, name := range []string{sessionCookie, csrfCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: name == sessionCookie, SameSite: http.SameSiteStrictMode})
	}
	w.WriteHeader(http.StatusNoContent)
}

// session tells the page who it is and its CSRF token after a reload.
func (s *server) session(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	v := sessionView{Role: p.role, Name: p.name, Project: p.project}
	if p.session != "" {
		v.CSRFToken, v.ExpiresAt = s.auth.csrfToken(p.session), p.expires.UTC()
	}
	writeJSON(w, http.StatusOK, v)
}

// sessionDigest is what console_revoked_sessions keys a session cookie by.
func sessionDigest(value string) []byte {
	h := sha256.Sum256([]byte(value))
	return h[:]
}

// revoke records that the session cookie value (valid until expires) was
// logged out, and forgets revoked sessions that have expired anyway.
func (s *server) revoke(ctx context.Context, value string, expires time.Time) error {
	if _, err := s.pool.Exec(ctx, `WITH gone AS (DELETE FROM console_revoked_sessions WHERE expires_at < now())
		INSERT INTO console_revoked_sessions (digest, expires_at) VALUES ($1, $2)
		ON CONFLICT (digest) DO NOTHING`, sessionDigest(value), expires); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// revoked reports whether the session cookie value was logged out.
func (s *server) revoked(ctx context.Context, value string) (bool, error) {
	var out bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_revoked_sessions WHERE digest = $1)`,
		sessionDigest(value)).Scan(&out)
	if err != nil {
		return false, fmt.Errorf("check session: %w", err)
	}
	return out, nil
}
