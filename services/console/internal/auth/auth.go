// Package auth is who calls the console: the configuration's tokens
// (DUBFLOW_API_TOKEN, _READ_TOKEN, DUBFLOW_API_TOKENS) and the projects'
// (pkg/tenant), signed session cookies with their CSRF tokens, and the
// sessions logged out (console_revoked_sessions). It holds no state
// besides its keys, so every replica with the same configuration accepts
// every replica's sessions.
package auth

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
	"github.com/google/uuid"
)

// Roles a token or session grants. The configuration's tokens are admin
// or read across every project; a project's token (pkg/tenant) is admin,
// operator or read within its project (Principal.Project).
const (
	RoleAdmin    = "admin"
	RoleRead     = "read"
	RoleOperator = tenant.RoleOperator
	// roleProject marks a session made from a project's token: the
	// session names the token's id, and its row (read at every request)
	// gives the project and role, so that a revoked token's sessions end too.
	roleProject = "project"
)

// Names of the session and CSRF cookies and of the CSRF header.
const (
	SessionCookie = "dubflow_session"
	CSRFCookie    = "dubflow_csrf"
	CSRFHeader    = "X-CSRF-Token"
)

// Auth checks bearer tokens and signs and verifies session cookies. It
// holds no state besides its keys, so every replica with the same
// configuration accepts every replica's sessions; the sessions logged out
// are revoked in Postgres (Revoke), which every replica reads (Revoked).
type Auth struct {
	tokens []namedToken
	// Store holds the projects' tokens (nil: only the configuration's).
	Store store.Querier
	key   []byte
	ttl   time.Duration
	now   func() time.Time
}

// Config is what Auth is made of.
type Config struct {
	// APIToken and ReadToken are the single admin and read tokens, named
	// "admin" and "read"; APITokens is DUBFLOW_API_TOKENS (ValidateTokens
	// checked them).
	APIToken, ReadToken, APITokens string
	// SessionKey signs the sessions; "" derives it from every token, so
	// that rotating a token ends every session.
	SessionKey string
	// Session is how long a session lasts.
	Session time.Duration
}

// New returns the Auth of cfg.
func New(cfg Config) *Auth {
	a := &Auth{tokens: configuredTokens(cfg.APIToken, cfg.ReadToken, cfg.APITokens), ttl: cfg.Session, now: time.Now}
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

func (a *Auth) mac(parts ...string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(strings.Join(parts, "|")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// NewSession returns a signed cookie value for the token named name with
// role, and its expiry.
func (a *Auth) NewSession(name, role string) (string, time.Time) {
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	payload := role + "." + strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(nonce) + "." + name
	return payload + "." + a.mac("session", payload), exp
}

// verifySession returns the principal of a valid, unexpired cookie value
// (a cookie from before tokens had names is named by its role).
func (a *Auth) verifySession(v string) (Principal, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !hmac.Equal([]byte(v[i+1:]), []byte(a.mac("session", v[:i]))) {
		return Principal{}, false
	}
	f := strings.Split(v[:i], ".")
	if len(f) == 3 {
		f = append(f, f[0])
	}
	if len(f) != 4 || (f[0] != RoleAdmin && f[0] != RoleRead && f[0] != roleProject) {
		return Principal{}, false
	}
	sec, err := strconv.ParseInt(f[1], 10, 64)
	exp := time.Unix(sec, 0)
	if err != nil || !a.now().Before(exp) {
		return Principal{}, false
	}
	return Principal{Role: f[0], Name: f[3], Session: v, Expires: exp}, true
}

// CSRFToken is the CSRF token bound to a session cookie value.
func (a *Auth) CSRFToken(session string) string { return a.mac("csrf", session) }

// Principal is who a request acts as.
type Principal struct {
	Role    string
	Name    string // the token's name (DUBFLOW_API_TOKENS; "admin" or "read" for the single tokens)
	Session string // the cookie value when authenticated by cookie
	Expires time.Time
	// Project is the project of a project's token; "" for the
	// configuration's tokens, which act across every project.
	Project string
	// TokenID is a project's token's id (uuid.Nil for the configuration's).
	TokenID uuid.UUID
}

// Global reports whether p acts across every project.
func (p Principal) Global() bool { return p.Project == "" }

// CanAct reports whether p may call the routes that change things (access
// admin): an admin across every project, a project's admin or operator.
func (p Principal) CanAct() bool {
	if p.Global() {
		return p.Role == RoleAdmin
	}
	return p.Role == RoleAdmin || p.Role == RoleOperator
}

// CanManage reports whether p may manage a project's tokens: an admin
// across every project, or the project's own admin (access manager).
func (p Principal) CanManage() bool { return p.Role == RoleAdmin }

// projectPrincipal is who a project's token acts as: named project/name.
func projectPrincipal(t tenant.Token) Principal {
	return Principal{Role: t.Role, Name: t.Project + "/" + t.Name, Project: t.Project, TokenID: t.ID}
}

// Authenticate finds the request's principal: a bearer token first, then
// the session cookie. The scheme of the Authorization header is matched
// without regard to case ("bearer", "BEARER": RFC 7235). A request with the
// cookie that changes state must carry the session's CSRF token in the
// X-CSRF-Token header. Whether the session was logged out is not checked
// here (Revoked). With an error, the principal is empty, or the
// session's when only the CSRF token is wrong.
func (a *Auth) Authenticate(r *http.Request) (Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(h), " ")
		tok = strings.TrimSpace(tok)
		name, role := a.lookup(tok)
		if !strings.EqualFold(scheme, "Bearer") {
			return Principal{}, apierr.Unauthorized("invalid bearer token")
		}
		if role == "" {
			return a.projectToken(r.Context(), tok)
		}
		return Principal{Role: role, Name: name}, nil
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return Principal{}, apierr.Unauthorized("log in (POST /api/login) or send Authorization: Bearer <token>")
	}
	p, ok := a.verifySession(c.Value)
	if !ok {
		return Principal{}, apierr.Unauthorized("session expired or invalid; log in again")
	}
	if p.Role == roleProject {
		var err error
		if p, err = a.projectSession(r.Context(), p); err != nil {
			return Principal{}, err
		}
	}
	if !safeMethod(r.Method) {
		got := r.Header.Get(CSRFHeader)
		if got == "" || !hmac.Equal([]byte(got), []byte(a.CSRFToken(c.Value))) {
			// The principal names who was refused (the audit); the
			// request is not served.
			return p, apierr.Forbidden("csrf", "missing or wrong "+CSRFHeader+" header")
		}
	}
	return p, nil
}

// projectToken finds the live project's token whose secret is tok.
func (a *Auth) projectToken(ctx context.Context, tok string) (Principal, error) {
	if a.Store == nil || tok == "" {
		return Principal{}, apierr.Unauthorized("invalid bearer token")
	}
	t, ok, err := tenant.Lookup(ctx, a.Store, tok)
	if err != nil {
		return Principal{}, apierr.UnavailableBecause("the token cannot be checked now; try again", err)
	}
	if !ok {
		return Principal{}, apierr.Unauthorized("invalid bearer token")
	}
	return projectPrincipal(t), nil
}

// projectSession reads the token a project's session was made from: a
// token revoked or expired since ends its sessions at their next request.
func (a *Auth) projectSession(ctx context.Context, p Principal) (Principal, error) {
	id, err := uuid.Parse(p.Name)
	if err != nil || a.Store == nil {
		return Principal{}, apierr.Unauthorized("session expired or invalid; log in again")
	}
	t, ok, err := tenant.LookupID(ctx, a.Store, id)
	if err != nil {
		return Principal{}, apierr.UnavailableBecause("the session cannot be checked now; try again", err)
	}
	if !ok {
		return Principal{}, apierr.Unauthorized("session ended (its token was revoked or expired); log in again")
	}
	out := projectPrincipal(t)
	out.Session, out.Expires = p.Session, p.Expires
	return out, nil
}

// LoginAs finds who token is for a login: the configuration's tokens, then
// the projects'. It answers the session's role and name to sign (a
// project's session names its token's id) and the principal.
func (a *Auth) LoginAs(ctx context.Context, token string) (role, name string, p Principal, err error) {
	if name, role := a.lookup(token); role != "" {
		return role, name, Principal{Role: role, Name: name}, nil
	}
	if p, err = a.projectToken(ctx, token); err != nil {
		return "", "", p, err
	}
	return roleProject, p.TokenID.String(), p, nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sessionDigest is what console_revoked_sessions keys a session cookie by.
func sessionDigest(value string) []byte {
	h := sha256.Sum256([]byte(value))
	return h[:]
}

// Revoke records that the session cookie value (valid until expires) was
// logged out, and forgets revoked sessions that have expired anyway.
func Revoke(ctx context.Context, db store.Querier, value string, expires time.Time) error {
	if _, err := db.Exec(ctx, `WITH gone AS (DELETE FROM console_revoked_sessions WHERE expires_at < now())
		INSERT INTO console_revoked_sessions (digest, expires_at) VALUES ($1, $2)
		ON CONFLICT (digest) DO NOTHING`, sessionDigest(value), expires); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// Revoked reports whether the session cookie value was logged out.
func Revoked(ctx context.Context, db store.Querier, value string) (bool, error) {
	var out bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_revoked_sessions WHERE digest = $1)`,
		sessionDigest(value)).Scan(&out)
	if err != nil {
		return false, fmt.Errorf("check session: %w", err)
	}
	return out, nil
}
