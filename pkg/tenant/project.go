package tenant

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Default is the project of the local stack, and of every task submitted
// without one.
const Default = "default"

// Fair scopes of a project (Project.FairScope).
const (
	ScopeProject = "project" // the project's tasks share each step's window: projects take turns
	ScopeTask    = "task"    // each task has its own window (the default project's)
)

// Errors callers branch on (errors.Is); the error's text says what.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("exists already")
	ErrInvalid  = errors.New("invalid")
)

// idPattern is what a project id may be: it names the project in task
// messages, object keys and metric labels.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidID reports whether id may name a project.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Project is a project as every door shows it (GET /api/projects, dubctl
// project list --json).
type Project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// SharedEngines: the project's tasks may use the shared engines.
	SharedEngines bool `json:"sharedEngines"`
	// DailySharedMinutes bounds the minutes of video its tasks take
	// through the shared engines a day (UTC); null: no limit.
	DailySharedMinutes *int      `json:"dailySharedMinutes"`
	FairScope          string    `json:"fairScope"`
	CreatedAt          time.Time `json:"createdAt"`
	CreatedBy          string    `json:"createdBy"`
}

// NewProject is a project to create (POST /api/projects' body).
type NewProject struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	SharedEngines      *bool  `json:"sharedEngines"`
	DailySharedMinutes *int   `json:"dailySharedMinutes"`
	FairScope          string `json:"fairScope"`
}

// Check refuses what no project may have; the error is ErrInvalid.
func (n NewProject) Check() error {
	switch {
	case !ValidID(n.ID):
		return fmt.Errorf("%w: project id %q: want 1..63 of a-z 0-9 _ -, starting with a letter or digit", ErrInvalid, cut(n.ID))
	case len(n.Name) > 200:
		return fmt.Errorf("%w: project name: want at most 200 characters", ErrInvalid)
	case n.DailySharedMinutes != nil && (*n.DailySharedMinutes < 0 || *n.DailySharedMinutes > 1_000_000):
		return fmt.Errorf("%w: dailySharedMinutes %d: want 0..1000000 (null: no limit)", ErrInvalid, *n.DailySharedMinutes)
	case n.FairScope != "" && n.FairScope != ScopeProject && n.FairScope != ScopeTask:
		return fmt.Errorf("%w: fairScope %q: want project or task", ErrInvalid, cut(n.FairScope))
	}
	return nil
}

const projectColumns = `id, name, shared_engines, daily_shared_minutes, fair_scope, created_at, created_by`

func scanProject(row pgx.Row) (Project, error) {
	var p Project
	var minutes *int32
	err := row.Scan(&p.ID, &p.Name, &p.SharedEngines, &minutes, &p.FairScope, &p.CreatedAt, &p.CreatedBy)
	if minutes != nil {
		m := int(*minutes)
		p.DailySharedMinutes = &m
	}
	return p, err
}

// CreateProject stores n, created by by; ErrExists when its id is taken.
func CreateProject(ctx context.Context, q store.Querier, n NewProject, by string) (Project, error) {
	if err := n.Check(); err != nil {
		return Project{}, err
	}
	shared := n.SharedEngines == nil || *n.SharedEngines
	scope := n.FairScope
	if scope == "" {
		scope = ScopeProject
	}
	name := n.Name
	if name == "" {
		name = n.ID
	}
	p, err := scanProject(q.QueryRow(ctx, `INSERT INTO projects (id, name, shared_engines, daily_shared_minutes, fair_scope, created_by)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+projectColumns, n.ID, name, shared, n.DailySharedMinutes, scope, by))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return Project{}, fmt.Errorf("%w: project %s", ErrExists, n.ID)
	}
	if err != nil {
		return Project{}, fmt.Errorf("create project %s: %w", n.ID, err)
	}
	return p, nil
}

// ListProjects returns the projects by id; only, when not "", keeps that
// one alone (a project token's view).
func ListProjects(ctx context.Context, q store.Querier, only string) ([]Project, error) {
	rows, err := q.Query(ctx, `SELECT `+projectColumns+` FROM projects WHERE $1 = '' OR id = $1 ORDER BY id`, only)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Project, error) { return scanProject(r) })
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	if out == nil {
		out = []Project{}
	}
	return out, nil
}

// GetProject reads project id; ErrNotFound when there is none.
func GetProject(ctx context.Context, q store.Querier, id string) (Project, error) {
	p, err := scanProject(q.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Project{}, fmt.Errorf("%w: project %s", ErrNotFound, cut(id))
	}
	if err != nil {
		return Project{}, fmt.Errorf("read project %s: %w", cut(id), err)
	}
	return p, nil
}

// Exists reports whether project id exists.
func Exists(ctx context.Context, q store.Querier, id string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projects WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("find project %s: %w", cut(id), err)
	}
	return ok, nil
}

// cut shortens a value echoed in an error.
func cut(v string) string {
	if r := []rune(v); len(r) > 64 {
		return string(r[:64]) + "…"
	}
	return v
}
