// Package projects is the routes of the projects and their tokens (issue
// 51, pkg/tenant): an admin across every project creates projects; a
// project's admin (or an admin across every project) creates, lists and
// revokes the project's tokens. A token's secret is answered once, when it
// is made; engine keys are never answered by any route.
package projects

import (
	"errors"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Room serves the projects' routes.
type Room struct {
	Pool *pgxpool.Pool
	Fail route.Fail
}

// Routes are /api/projects... and /api/tokens/{id}; what changes a project
// or a token is audited.
func (s Room) Routes() []route.Route {
	return []route.Route{
		{Method: "GET", Path: "/api/projects", Access: route.Reader, Handle: s.listProjects},
		{Method: "POST", Path: "/api/projects", Access: route.Admin, Audit: "project", Handle: s.createProject},
		{Method: "GET", Path: "/api/projects/{id}", Access: route.Reader, Handle: s.getProject},
		{Method: "GET", Path: "/api/projects/{id}/tokens", Access: route.Manager, Handle: s.listTokens},
		{Method: "POST", Path: "/api/projects/{id}/tokens", Access: route.Manager, Audit: "token", Handle: s.createToken},
		{Method: "DELETE", Path: "/api/tokens/{id}", Access: route.Manager, Audit: "revoke", Handle: s.revokeToken},
	}
}

// projectDetail is what GET /api/projects/{id} answers: the project and
// what it used of the shared engines today.
type projectDetail struct {
	Project tenant.Project `json:"project"`
	Usage   tenant.Usage   `json:"usage"`
}

// tenantError answers pkg/tenant's errors with their status.
func tenantError(err error) error {
	switch {
	case errors.Is(err, tenant.ErrInvalid):
		return apierr.BadRequest(err.Error())
	case errors.Is(err, tenant.ErrExists):
		return apierr.Conflict(err.Error())
	case errors.Is(err, tenant.ErrNotFound):
		return apierr.NotFound(err.Error())
	}
	return err
}

// listProjects answers every project to an admin or reader across every
// project, its own to a project's token.
func (s Room) listProjects(w http.ResponseWriter, r *http.Request) {
	out, err := tenant.ListProjects(r.Context(), s.Pool, route.ProjectOf(r))
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, map[string]any{"projects": out})
}

// createProject creates the project of the body (tenant.NewProject).
func (s Room) createProject(w http.ResponseWriter, r *http.Request) {
	var body tenant.NewProject
	if err := jsonbody.Decode(r, &body); err != nil {
		s.Fail(w, r, err)
		return
	}
	p, err := tenant.CreateProject(r.Context(), s.Pool, body, route.PrincipalOf(r).Name)
	if err != nil {
		s.Fail(w, r, tenantError(err))
		return
	}
	auditlog.NoteTarget(r, p.ID)
	route.JSON(w, http.StatusCreated, p)
}

// getProject answers a project and its use of the shared engines today.
func (s Room) getProject(w http.ResponseWriter, r *http.Request) {
	p, err := tenant.GetProject(r.Context(), s.Pool, r.PathValue("id"))
	if err != nil {
		s.Fail(w, r, tenantError(err))
		return
	}
	u, err := tenant.UsageOf(r.Context(), s.Pool, p.ID, time.Now())
	if err != nil {
		s.Fail(w, r, tenantError(err))
		return
	}
	route.JSON(w, http.StatusOK, projectDetail{Project: p, Usage: u})
}

// listTokens answers a project's tokens, live and revoked, without their
// secrets.
func (s Room) listTokens(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if _, err := tenant.GetProject(ctx, s.Pool, r.PathValue("id")); err != nil {
		s.Fail(w, r, tenantError(err))
		return
	}
	out, err := tenant.ListTokens(ctx, s.Pool, r.PathValue("id"))
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, map[string]any{"tokens": out})
}

// createToken makes a token of the project ({name, role, expiresAt}) and
// answers its secret, once.
func (s Room) createToken(w http.ResponseWriter, r *http.Request) {
	var body tenant.NewToken
	if err := jsonbody.Decode(r, &body); err != nil {
		s.Fail(w, r, err)
		return
	}
	body.Project = r.PathValue("id")
	t, err := tenant.CreateToken(r.Context(), s.Pool, body, route.PrincipalOf(r).Name, time.Now())
	if err != nil {
		s.Fail(w, r, tenantError(err))
		return
	}
	auditlog.Note(r, "token", t.Project+"/"+t.Name)
	auditlog.Note(r, "role", t.Role)
	route.JSON(w, http.StatusCreated, t)
}

// revokeToken revokes a token: every replica refuses it, and the sessions
// made from it, from their next request on.
func (s Room) revokeToken(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.Fail(w, r, apierr.BadRequest("token id: want a UUID"))
		return
	}
	t, err := tenant.RevokeToken(r.Context(), s.Pool, id, route.ProjectOf(r), route.PrincipalOf(r).Name)
	if err != nil {
		s.Fail(w, r, tenantError(err))
		return
	}
	route.JSON(w, http.StatusOK, t)
}
