package tenant

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Roles of a project's token.
const (
	RoleAdmin    = "admin"    // the project's tasks, dead letters and tokens
	RoleOperator = "operator" // the project's tasks and dead letters
	RoleRead     = "read"     // reads the project's tasks
)

// Roles lists the roles a token may have.
var Roles = []string{RoleAdmin, RoleOperator, RoleRead}

// MaxLifetime bounds a token's expiry from its creation.
const MaxLifetime = 366 * 24 * time.Hour

// SecretPrefix starts every secret this package makes (a scanner of
// leaked secrets can find them).
const SecretPrefix = "dft_"

var tokenName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Token is a project's token as every door lists it: never its secret.
type Token struct {
	ID        uuid.UUID  `json:"id"`
	Project   string     `json:"project"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	CreatedAt time.Time  `json:"createdAt"`
	CreatedBy string     `json:"createdBy"`
	ExpiresAt *time.Time `json:"expiresAt"`
	RevokedAt *time.Time `json:"revokedAt"`
}

// Created is a token just made: its record and its secret, shown once.
type Created struct {
	Token
	Secret string `json:"token"`
}

// NewToken is a token to create for a project (POST
// /api/projects/{id}/tokens' body; Project from the path).
type NewToken struct {
	Project   string     `json:"-"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

// Check refuses what no token may be, as of now; the error is ErrInvalid.
func (n NewToken) Check(now time.Time) error {
	switch {
	case !tokenName.MatchString(n.Name):
		return fmt.Errorf("%w: token name %q: want 1..64 of A-Z a-z 0-9 _ -", ErrInvalid, cut(n.Name))
	case !slices.Contains(Roles, n.Role):
		return fmt.Errorf("%w: role %q: want admin, operator or read", ErrInvalid, cut(n.Role))
	case n.ExpiresAt != nil && !n.ExpiresAt.After(now):
		return fmt.Errorf("%w: expiresAt %s: want a time to come", ErrInvalid, n.ExpiresAt.UTC().Format(time.RFC3339))
	case n.ExpiresAt != nil && n.ExpiresAt.Sub(now) > MaxLifetime:
		return fmt.Errorf("%w: expiresAt %s: want at most 366 days from now", ErrInvalid, n.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Digest is what api_tokens keys a secret by.
func Digest(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

const tokenColumns = `id, project, name, role, created_at, created_by, expires_at, revoked_at`

func scanToken(row pgx.Row) (Token, error) {
	var t Token
	err := row.Scan(&t.ID, &t.Project, &t.Name, &t.Role, &t.CreatedAt, &t.CreatedBy, &t.ExpiresAt, &t.RevokedAt)
	return t, err
}

// CreateToken makes a secret for n and stores its digest, created by by:
// ErrNotFound when the project is not there, ErrExists when a live token
// of the project has the name.
func CreateToken(ctx context.Context, q store.Querier, n NewToken, by string, now time.Time) (Created, error) {
	if err := n.Check(now); err != nil {
		return Created{}, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Created{}, fmt.Errorf("create token: %w", err)
	}
	secret := SecretPrefix + base64.RawURLEncoding.EncodeToString(raw)
	var expires *time.Time
	if n.ExpiresAt != nil {
		e := n.ExpiresAt.UTC().Truncate(time.Second)
		expires = &e
	}
	t, err := scanToken(q.QueryRow(ctx, `INSERT INTO api_tokens (project, name, role, digest, created_by, expires_at)
		SELECT p.id, $2, $3, $4, $5, $6 FROM projects p WHERE p.id = $1 RETURNING `+tokenColumns,
		n.Project, n.Name, n.Role, Digest(secret), by, expires))
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Created{}, fmt.Errorf("%w: project %s", ErrNotFound, cut(n.Project))
	case errors.As(err, &pe) && pe.Code == "23505":
		return Created{}, fmt.Errorf("%w: a token named %s in project %s", ErrExists, n.Name, n.Project)
	case err != nil:
		return Created{}, fmt.Errorf("create token %s: %w", n.Name, err)
	}
	return Created{Token: t, Secret: secret}, nil
}

// ListTokens returns the tokens of project ("": of every project), live
// and revoked, newest first.
func ListTokens(ctx context.Context, q store.Querier, project string) ([]Token, error) {
	rows, err := q.Query(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE $1 = '' OR project = $1
		ORDER BY created_at DESC, id`, project)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) { return scanToken(r) })
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	if out == nil {
		out = []Token{}
	}
	return out, nil
}

// TokenProject returns the project of token id; ErrNotFound without one.
func TokenProject(ctx context.Context, q store.Querier, id uuid.UUID) (string, error) {
	var p string
	err := q.QueryRow(ctx, `SELECT project FROM api_tokens WHERE id = $1`, id).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: token %s", ErrNotFound, id)
	}
	if err != nil {
		return "", fmt.Errorf("read token %s: %w", id, err)
	}
	return p, nil
}

// RevokeToken revokes token id, by by; project, when not "", must be the
// token's (else ErrNotFound, as for no token). Revoking a revoked token
// changes nothing and answers it as it is.
func RevokeToken(ctx context.Context, q store.Querier, id uuid.UUID, project, by string) (Token, error) {
	t, err := scanToken(q.QueryRow(ctx, `WITH r AS (
		UPDATE api_tokens SET revoked_at = now(), revoked_by = $3
		 WHERE id = $1 AND ($2 = '' OR project = $2) AND revoked_at IS NULL RETURNING `+tokenColumns+`)
		SELECT `+tokenColumns+` FROM r
		UNION ALL SELECT `+tokenColumns+` FROM api_tokens
		 WHERE id = $1 AND ($2 = '' OR project = $2) AND NOT EXISTS (SELECT 1 FROM r)`, id, project, by))
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, fmt.Errorf("%w: token %s", ErrNotFound, id)
	}
	if err != nil {
		return Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return t, nil
}

// Lookup finds the live token (not revoked, not expired as of the
// database's clock) whose secret is secret.
func Lookup(ctx context.Context, q store.Querier, secret string) (Token, bool, error) {
	return live(ctx, q, `digest = $1`, Digest(secret))
}

// LookupID finds token id if it is live (a session made from it).
func LookupID(ctx context.Context, q store.Querier, id uuid.UUID) (Token, bool, error) {
	return live(ctx, q, `id = $1`, id)
}

func live(ctx context.Context, q store.Querier, where string, arg any) (Token, bool, error) {
	t, err := scanToken(q.QueryRow(ctx, `SELECT `+tokenColumns+` FROM api_tokens
		WHERE `+where+` AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, fmt.Errorf("look up token: %w", err)
	}
	return t, true, nil
}
