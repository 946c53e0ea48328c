package database

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
)

// CreateProject stores a project as who runs dubctl, with the console's
// audit row (action project).
func (d *Backend) CreateProject(ctx context.Context, n tenant.NewProject) (tenant.Project, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return tenant.Project{}, err
	}
	p, err := tenant.CreateProject(ctx, pool, n, d.actor)
	d.record(ctx, actionOf("project", n.ID, http.StatusCreated), err)
	return p, tenantUsage(err)
}

// Projects lists every project.
func (d *Backend) Projects(ctx context.Context) ([]tenant.Project, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return tenant.ListProjects(ctx, pool, "")
}

// CreateToken makes a token as who runs dubctl, with the console's audit
// row (action token).
func (d *Backend) CreateToken(ctx context.Context, n tenant.NewToken) (tenant.Created, error) {
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
func (d *Backend) Tokens(ctx context.Context, project string) ([]tenant.Token, error) {
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
func (d *Backend) RevokeToken(ctx context.Context, id uuid.UUID) (tenant.Token, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return tenant.Token{}, err
	}
	t, err := tenant.RevokeToken(ctx, pool, id, "", d.actor)
	d.record(ctx, actionOf("revoke", id.String(), http.StatusOK), err)
	return t, err
}

// Settings lists the settings from the database.
func (d *Backend) Settings(ctx context.Context) ([]setting.Setting, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return setting.List(ctx, pool)
}

// SetSetting changes a setting in the database (setting.Set: the console's
// check and text) as who runs dubctl, and writes the audit row the console
// writes for the same change (action config, role database).
func (d *Backend) SetSetting(ctx context.Context, key, value string) (setting.Setting, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return setting.Setting{}, err
	}
	before, _ := setting.Get(ctx, pool, key)
	s, err := setting.Set(ctx, pool, key, value, d.actor)
	if errors.Is(err, setting.ErrInvalid) {
		err = cli.UsageError(err)
	}
	a := actionOf("config", key, http.StatusOK)
	a.detail = map[string]any{"from": before.Value, "value": value}
	d.record(ctx, a, err)
	return s, err
}

// tenantUsage makes a refusal of pkg/tenant's check a usage error (exit
// 2), as the console's 400 is.
func tenantUsage(err error) error {
	if errors.Is(err, tenant.ErrInvalid) {
		return cli.UsageError(err)
	}
	return err
}
