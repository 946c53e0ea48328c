package main

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Projects scope what a token sees (issue 51). The configuration's tokens
// act across every project; a project's token acts on its project only,
// and every route says in openapi.json which kind of caller it serves
// (x-scope), so that a new route is judged by construction:
//
//   - contract.ScopeSystem: the routes of the whole installation (queues, workers,
//     engines, the audit log, settings, the waiting queue, creating a
//     project) answer 403 to a project's token;
//   - contract.ScopeProject: a project's token may call it; the guard answers 404
//     — as for an id that does not exist, with the same text — for an id
//     in the path that belongs to another project (owned), and the lists,
//     the bulk actions and the event stream keep to the caller's project
//     (projectOf).

// permits checks that p may call rt: the route's scope, then its access.
func permits(p principal, rt route) error {
	if op := apiContract[rt.method+" "+rt.path]; op != nil && op.Scope != contract.ScopeProject && !p.Global() {
		return apierr.Forbidden("forbidden", "this route is for admins across every project; a project's token cannot call it")
	}
	switch {
	case rt.access == admin && !p.CanAct():
		return apierr.Forbidden("forbidden", "this token is read-only")
	case rt.access == manager && !p.CanManage():
		return apierr.Forbidden("forbidden", "only an admin manages a project's tokens")
	}
	return nil
}

// projectOf is the project a request's lists and actions keep to: the
// project's token's, "" (every project) for the configuration's tokens.
func projectOf(r *http.Request) string { return principalOf(r).Project }

// owned checks, for a project's token, that the resource the path names
// belongs to its project; another project's, or none, is 404 with the
// text a missing one gets. A path parameter the guard does not know is
// refused the same way: a route is scoped before a project's token
// reaches it.
func (s *server) owned(r *http.Request, rt route, p principal) error {
	if p.Global() || !strings.Contains(rt.path, "{") {
		return nil
	}
	ctx := r.Context()
	var owner string
	var err error
	switch {
	case strings.HasPrefix(rt.path, "/api/tasks/{id}"):
		id, perr := uuid.Parse(r.PathValue("id"))
		if perr != nil {
			return apierr.BadRequest(fmt.Sprintf("task id %q: want a UUID", apierr.Short(r.PathValue("id"))))
		}
		err = s.pool.QueryRow(ctx, `SELECT project FROM tasks WHERE id = $1`, id).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != p.Project) {
			return fmt.Errorf("task %s: %w", id, view.ErrNotFound)
		}
	case strings.HasPrefix(rt.path, "/api/dead-letters/{id}"):
		id, perr := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if perr != nil {
			return apierr.BadRequest(fmt.Sprintf("dead letter id %q: want a positive number", apierr.Short(r.PathValue("id"))))
		}
		err = s.pool.QueryRow(ctx, `SELECT t.project FROM dead_letters d JOIN tasks t ON t.id = d.task_id
			WHERE d.id = $1`, id).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != p.Project) {
			return fmt.Errorf("dead letter %d: %w", id, dlq.ErrNotFound)
		}
	case strings.HasPrefix(rt.path, "/api/projects/{id}"):
		if r.PathValue("id") != p.Project {
			return apierr.NotFound(fmt.Sprintf("project %s: no such project", apierr.Short(r.PathValue("id"))))
		}
	case strings.HasPrefix(rt.path, "/api/tokens/{id}"):
		id, perr := uuid.Parse(r.PathValue("id"))
		if perr != nil {
			return apierr.BadRequest(fmt.Sprintf("token id %q: want a UUID", apierr.Short(r.PathValue("id"))))
		}
		owner, err = tenant.TokenProject(ctx, s.pool, id)
		if errors.Is(err, tenant.ErrNotFound) || (err == nil && owner != p.Project) {
			return apierr.NotFound(fmt.Sprintf("token %s: no such token", id))
		}
	default:
		return apierr.NotFound("no such " + rt.path)
	}
	if err != nil {
		return apierr.UnavailableBecause("the database cannot be reached now; try again", err)
	}
	return nil
}
