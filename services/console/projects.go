package main

import (
	"errors"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
)

// projectRoutes are the projects and their tokens (issue 51): an admin
// across every project creates projects; a project's admin (or an admin
// across every project) creates, lists and revokes the project's tokens.
// A token's secret is answered once, when it is made; engine keys are never
// answered by any route.
func (s *server) projectRoutes() []route {
	return []route{
		{"GET", "/api/projects", reader, s.listProjects},
		{"POST", "/api/projects", admin, s.audited("project", s.createProject)},
		{"GET", "/api/projects/{id}", reader, s.getProject},
		{"GET", "/api/projects/{id}/tokens", manager, s.listTokens},
		{"POST", "/api/projects/{id}/tokens", manager, s.audited("token", s.createToken)},
		{"DELETE", "/api/tokens/{id}", manager, s.audited("revoke", s.revokeToken)},
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
func (s *server) listProjects(w http.ResponseWriter, r *http.Request) {
	out, err := tenant.ListProjects(r.Context(), s.pool, projectOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": out})
}

// createProject creates the project of the body (tenant.NewProject).
func (s *server) createProject(w http.ResponseWriter, r *http.Request) {
	var body tenant.NewProject
	if err := jsonbody.Decode(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := tenant.CreateProject(r.Context(), s.pool, body, principalOf(r).Name)
	if err != nil {
		s.fail(w, r, tenantError(err))
		return
	}
	auditlog.NoteTarget(r, p.ID)
	writeJSON(w, http.StatusCreated, p)
}

// getProject answers a project and its use of the shared engines today.
func (s *server) getProject(w http.ResponseWriter, r *http.Request) {
	p, err := tenant.GetProject(r.Context(), s.pool, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, tenantError(err))
		return
	}
	u, err := tenant.UsageOf(r.Context(), s.pool, p.ID, time.Now())
	if err != nil {
		s.fail(w, r, tenantError(err))
		return
	}
	writeJSON(w, http.StatusOK, projectDetail{Project: p, Usage: u})
}

// listTokens answers a project's tokens, live and revoked, without their
// secrets.
func (s *server) listTokens(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if _, err := tenant.GetProject(ctx, s.pool, r.PathValue("id")); err != nil {
		s.fail(w, r, tenantError(err))
		return
	}
	out, err := tenant.ListTokens(ctx, s.pool, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

// createToken makes a token of the project ({name, role, expiresAt}) and
// answers its secret, once.
func (s *server) createToken(w http.ResponseWriter, r *http.Request) {
	var body tenant.NewToken
	if err := jsonbody.Decode(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	body.Project = r.PathValue("id")
	t, err := tenant.CreateToken(r.Context(), s.pool, body, principalOf(r).Name, time.Now())
	if err != nil {
		s.fail(w, r, tenantError(err))
		return
	}
	auditlog.Note(r, "token", t.Project+"/"+t.Name)
	auditlog.Note(r, "role", t.Role)
	writeJSON(w, http.StatusCreated, t)
}

// revokeToken revokes a token: every replica refuses it, and the sessions
// made from it, from their next request on.
func (s *server) revokeToken(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, apierr.BadRequest("token id: want a UUID"))
		return
	}
	t, err := tenant.RevokeToken(r.Context(), s.pool, id, projectOf(r), principalOf(r).Name)
	if err != nil {
		s.fail(w, r, tenantError(err))
		return
	}
	writeJSON(w, http.StatusOK, t)
}
