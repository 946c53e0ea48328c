package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// tenanter manages the projects and their tokens (pkg/tenant), in either
// mode: the same rows, the same checks, the same text and JSON.
type tenanter interface {
	CreateProject(ctx context.Context, n tenant.NewProject) (tenant.Project, error)
	Projects(ctx context.Context) ([]tenant.Project, error)
	CreateToken(ctx context.Context, n tenant.NewToken) (tenant.Created, error)
	Tokens(ctx context.Context, project string) ([]tenant.Token, error)
	RevokeToken(ctx context.Context, id uuid.UUID) (tenant.Token, error)
}

var (
	_ tenanter = (*dbBackend)(nil)
	_ tenanter = (*consoleBackend)(nil)
)

// projectCmd is `dubctl project create|list`.
func projectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "Create and list projects (the tenants: their tasks, tokens and engine use)",
		Long: `project creates and lists projects. Every task belongs to one (the local
stack's is "default"); a project's tokens (dubctl token) see and act on its
tasks only. --daily-shared-minutes bounds the minutes of video a day (UTC)
its tasks take through the shared engines: past it, their steps wait with
reason project_quota until the next day (parked, never failed).`,
	}
	cmd.AddCommand(projectCreateCmd(), projectListCmd())
	return cmd
}

func projectCreateCmd() *cobra.Command {
	var asJSON, noShared bool
	var n tenant.NewProject
	var minutes int
	cmd := &cobra.Command{
		Use:   "create ID [--name NAME] [--daily-shared-minutes N] [--no-shared-engines] [--fair-scope project|task] [--json]",
		Short: "Create a project (an admin's action)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n.ID = args[0]
			if cmd.Flags().Changed("daily-shared-minutes") {
				n.DailySharedMinutes = &minutes
			}
			if noShared {
				f := false
				n.SharedEngines = &f
			}
			return withTenanter(cmd, func(ctx context.Context, t tenanter) error {
				p, err := t.CreateProject(ctx, n)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), p)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "project %s created\n", p.ID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&n.Name, "name", "", "a name to show (default: the id)")
	cmd.Flags().IntVar(&minutes, "daily-shared-minutes", 0, "minutes of video a day on the shared engines (default: no limit)")
	cmd.Flags().BoolVar(&noShared, "no-shared-engines", false, "its tasks may not use the shared engines")
	cmd.Flags().StringVar(&n.FairScope, "fair-scope", "", "project (its tasks share each step's window; the default) or task")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the project as JSON")
	return cmd
}

func projectListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the projects (a project's token sees its own)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTenanter(cmd, func(ctx context.Context, t tenanter) error {
				list, err := t.Projects(ctx)
				if err != nil {
					return err
				}
				return printProjects(cmd.OutOrStdout(), list, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// tokenCmd is `dubctl token create|list|revoke`.
func tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke a project's API tokens",
		Long: `token manages a project's tokens: admin (the project's tasks, dead letters
and tokens), operator (its tasks and dead letters) or read. The secret is
printed once, when the token is made; only its SHA-256 is kept. A revoked
token is refused by every console replica from its next request on.`,
	}
	cmd.AddCommand(tokenCreateCmd(), tokenListCmd(), tokenRevokeCmd())
	return cmd
}

func tokenCreateCmd() *cobra.Command {
	var asJSON bool
	var n tenant.NewToken
	var expires string
	cmd := &cobra.Command{
		Use:   "create --project ID --name NAME --role admin|operator|read [--expires 30d] [--json]",
		Short: "Make a token of a project and print its secret, once",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if expires != "" {
				d, err := parseLifetime(expires)
				if err != nil {
					return usageError(err)
				}
				at := time.Now().Add(d).UTC().Truncate(time.Second)
				n.ExpiresAt = &at
			}
			return withTenanter(cmd, func(ctx context.Context, t tenanter) error {
				c, err := t.CreateToken(ctx, n)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), c)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "token %s (%s/%s, %s): %s\nKeep it: it is not shown again.\n",
					c.ID, c.Project, c.Name, c.Role, c.Secret)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&n.Project, "project", "", "the project (required)")
	cmd.Flags().StringVar(&n.Name, "name", "", "the token's name (required)")
	cmd.Flags().StringVar(&n.Role, "role", "", "admin, operator or read (required)")
	cmd.Flags().StringVar(&expires, "expires", "", "lifetime: 90d, 12h, … at most 366d (default: never)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token and its secret as JSON")
	for _, f := range []string{"project", "name", "role"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func tokenListCmd() *cobra.Command {
	var asJSON bool
	var project string
	cmd := &cobra.Command{
		Use:   "list --project ID [--json]",
		Short: "List a project's tokens, live and revoked, without their secrets",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTenanter(cmd, func(ctx context.Context, t tenanter) error {
				list, err := t.Tokens(ctx, project)
				if err != nil {
					return err
				}
				return printTokens(cmd.OutOrStdout(), list, asJSON)
			})
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "the project (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	_ = cmd.MarkFlagRequired("project")
	return cmd
}

func tokenRevokeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke TOKEN_ID [--json]",
		Short: "Revoke a token: refused everywhere from its next request on",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageError(fmt.Errorf("token id %q: want a UUID (dubctl token list)", args[0]))
			}
			return withTenanter(cmd, func(ctx context.Context, t tenanter) error {
				tok, err := t.RevokeToken(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), tok)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "token %s (%s/%s) revoked\n", tok.ID, tok.Project, tok.Name)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token as JSON")
	return cmd
}

// parseLifetime reads 90d, 36h, 45m (a Go duration, or whole days).
func parseLifetime(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("--expires %q: want a whole number of days (90d) or a duration (36h)", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--expires %q: want a whole number of days (90d) or a duration (36h)", v)
	}
	return d, nil
}

// withTenanter runs do on the mode the environment selects.
func withTenanter(cmd *cobra.Command, do func(ctx context.Context, t tenanter) error) error {
	return withBackend(cmd, func(ctx context.Context, b backend) error {
		t, ok := b.(tenanter)
		if !ok {
			return errors.New("this mode cannot manage projects")
		}
		return do(ctx, t)
	})
}

func printProjects(w io.Writer, list []tenant.Project, asJSON bool) error {
	if asJSON {
		return writeJSON(w, list)
	}
	t := newTable(w, "ID", "NAME", "SHARED ENGINES", "DAILY SHARED MINUTES", "FAIR SCOPE", "CREATED")
	for _, p := range list {
		limit := "-"
		if p.DailySharedMinutes != nil {
			limit = strconv.Itoa(*p.DailySharedMinutes)
		}
		t.row(p.ID, p.Name, strconv.FormatBool(p.SharedEngines), limit, p.FairScope, p.CreatedAt.UTC().Format(time.RFC3339))
	}
	return t.flush()
}

func printTokens(w io.Writer, list []tenant.Token, asJSON bool) error {
	if asJSON {
		return writeJSON(w, list)
	}
	t := newTable(w, "ID", "PROJECT", "NAME", "ROLE", "EXPIRES", "REVOKED")
	stamp := func(at *time.Time) string {
		if at == nil {
			return "-"
		}
		return at.UTC().Format(time.RFC3339)
	}
	for _, k := range list {
		t.row(k.ID.String(), k.Project, k.Name, k.Role, stamp(k.ExpiresAt), stamp(k.RevokedAt))
	}
	return t.flush()
}

// tenantUsage makes a refusal of pkg/tenant's check a usage error (exit
// 2), as the console's 400 is.
func tenantUsage(err error) error {
	if errors.Is(err, tenant.ErrInvalid) {
		return usageError(err)
	}
	return err
}

// CreateProject stores a project as who runs dubctl, with the console's
// audit row (action project).
func (d *dbBackend) CreateProject(ctx context.Context, n tenant.NewProject) (tenant.Project, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return tenant.Project{}, err
	}
	p, err := tenant.CreateProject(ctx, pool, n, d.actor)
	d.record(ctx, actionOf("project", n.ID, http.StatusCreated), err)
	return p, tenantUsage(err)
}

// Projects lists every project.
func (d *dbBackend) Projects(ctx context.Context) ([]tenant.Project, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return tenant.ListProjects(ctx, pool, "")
}

// CreateToken makes a token as who runs dubctl, with the console's audit
// row (action token).
func (d *dbBackend) CreateToken(ctx context.Context, n tenant.NewToken) (tenant.Created, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return tenant.Created{}, err
	}
	c, err := tenant.CreateToken(ctx, pool, n, d.actor, time.Now())
	a := actionOf("token", n.Project, http.StatusCreated)
	a.target = n.Project
	a.detail = map[string]any{"token": n.Project + "/" + n.Name, "role": n.Role}
	d.record(ctx, a, err)
	return c, tenantUsage(err)
}

// Tokens lists a project's tokens (ErrNotFound for no such project, as
// the console answers).
func (d *dbBackend) Tokens(ctx context.Context, project string) ([]tenant.Token, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tenant.GetProject(ctx, pool, project); err != nil {
		return nil, err
	}
	return tenant.ListTokens(ctx, pool, project)
}

// RevokeToken revokes a token as who runs dubctl, with the console's audit
// row (action revoke).
func (d *dbBackend) RevokeToken(ctx context.Context, id uuid.UUID) (tenant.Token, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return tenant.Token{}, err
	}
	t, err := tenant.RevokeToken(ctx, pool, id, "", d.actor)
	d.record(ctx, actionOf("revoke", id.String(), http.StatusOK), err)
	return t, err
}

// CreateProject sends POST /api/projects.
func (c *consoleBackend) CreateProject(ctx context.Context, n tenant.NewProject) (tenant.Project, error) {
	var p tenant.Project
	return p, c.post(ctx, "/api/projects", n, &p)
}

// Projects reads GET /api/projects.
func (c *consoleBackend) Projects(ctx context.Context) ([]tenant.Project, error) {
	var out struct {
		Projects []tenant.Project `json:"projects"`
	}
	return out.Projects, c.get(ctx, "/api/projects", &out)
}

// CreateToken sends POST /api/projects/{id}/tokens.
func (c *consoleBackend) CreateToken(ctx context.Context, n tenant.NewToken) (tenant.Created, error) {
	var out tenant.Created
	return out, c.post(ctx, "/api/projects/"+url.PathEscape(n.Project)+"/tokens", n, &out)
}

// Tokens reads GET /api/projects/{id}/tokens.
func (c *consoleBackend) Tokens(ctx context.Context, project string) ([]tenant.Token, error) {
	var out struct {
		Tokens []tenant.Token `json:"tokens"`
	}
	return out.Tokens, c.get(ctx, "/api/projects/"+url.PathEscape(project)+"/tokens", &out)
}

// RevokeToken sends DELETE /api/tokens/{id}.
func (c *consoleBackend) RevokeToken(ctx context.Context, id uuid.UUID) (tenant.Token, error) {
	var t tenant.Token
	return t, c.do(ctx, http.MethodDelete, "/api/tokens/"+id.String(), "", nil, &t)
}
