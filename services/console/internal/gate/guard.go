package gate

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
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// guard authenticates and authorizes a request, then checks it against the
// route's part of the OpenAPI document (internal/contract), before rt handles
// it (recorded in the audit when rt is audited).
func (g Gate) guard(rt route.Route) http.Handler {
	op := g.Contract[rt.Method+" "+rt.Path]
	handle := rt.Handle
	if rt.Audit != "" {
		handle = g.Audit.Audited(rt.Audit, handle)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p auth.Principal
		if rt.Access != route.Public {
			var ok bool
			if p, ok = g.authorize(w, r, rt); !ok {
				return
			}
			r = route.WithPrincipal(r, p)
		}
		if err := op.CheckRequest(w, r, g.BodyLimit(op, r)); err != nil {
			if rt.Method != http.MethodGet {
				g.refuse(w, r, rt, p, err) // counted with the refused requests
				return
			}
			g.Fail(w, r, err)
			return
		}
		if err := g.owned(r, rt, p); err != nil {
			g.Fail(w, r, err) // another project's id: 404, as for no such id
			return
		}
		handle(w, r)
	})
}

// authorize finds the request's principal and checks it may call rt; it
// answers the refusal itself and returns false.
func (g Gate) authorize(w http.ResponseWriter, r *http.Request, rt route.Route) (auth.Principal, bool) {
	p, err := g.Auth.Authenticate(r)
	if err != nil {
		g.refuse(w, r, rt, p, err)
		return p, false
	}
	if p.Session != "" {
		revoked, err := auth.Revoked(r.Context(), g.Pool, p.Session)
		if err != nil {
			g.Log.Error().Err(err).Str("path", apierr.CutEcho(r.URL.Path)).Msg("session check")
			g.Fail(w, r, apierr.Unavailable("the session cannot be checked now; try again, or send Authorization: Bearer <token>"))
			return p, false
		}
		if revoked {
			g.refuse(w, r, rt, p, apierr.Unauthorized("session ended (logged out); log in again"))
			return p, false
		}
	}
	if err := g.permits(p, rt); err != nil {
		g.refuse(w, r, rt, p, err)
		return p, false
	}
	return p, true
}

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
//     (route.ProjectOf).

// permits checks that p may call rt: the route's scope, then its access.
func (g Gate) permits(p auth.Principal, rt route.Route) error {
	if op := g.Contract[rt.Method+" "+rt.Path]; op != nil && op.Scope != contract.ScopeProject && !p.Global() {
		return apierr.Forbidden("forbidden", "this route is for admins across every project; a project's token cannot call it")
	}
	switch {
	case rt.Access == route.Admin && !p.CanAct():
		return apierr.Forbidden("forbidden", "this token is read-only")
	case rt.Access == route.Manager && !p.CanManage():
		return apierr.Forbidden("forbidden", "only an admin manages a project's tokens")
	}
	return nil
}

// owned checks, for a project's token, that the resource the path names
// belongs to its project; another project's, or none, is 404 with the
// text a missing one gets. A path parameter the guard does not know is
// refused the same way: a route is scoped before a project's token
// reaches it.
func (g Gate) owned(r *http.Request, rt route.Route, p auth.Principal) error {
	if p.Global() || !strings.Contains(rt.Path, "{") {
		return nil
	}
	ctx := r.Context()
	var owner string
	var err error
	switch {
	case strings.HasPrefix(rt.Path, "/api/tasks/{id}"):
		id, perr := uuid.Parse(r.PathValue("id"))
		if perr != nil {
			return apierr.BadRequest(fmt.Sprintf("task id %q: want a UUID", apierr.Short(r.PathValue("id"))))
		}
		err = g.Pool.QueryRow(ctx, `SELECT project FROM tasks WHERE id = $1`, id).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != p.Project) {
			return fmt.Errorf("task %s: %w", id, view.ErrNotFound)
		}
	case strings.HasPrefix(rt.Path, "/api/dead-letters/{id}"):
		id, perr := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if perr != nil {
			return apierr.BadRequest(fmt.Sprintf("dead letter id %q: want a positive number", apierr.Short(r.PathValue("id"))))
		}
		err = g.Pool.QueryRow(ctx, `SELECT t.project FROM dead_letters d JOIN tasks t ON t.id = d.task_id
			WHERE d.id = $1`, id).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != p.Project) {
			return fmt.Errorf("dead letter %d: %w", id, dlq.ErrNotFound)
		}
	case strings.HasPrefix(rt.Path, "/api/projects/{id}"):
		if r.PathValue("id") != p.Project {
			return apierr.NotFound(fmt.Sprintf("project %s: no such project", apierr.Short(r.PathValue("id"))))
		}
	case strings.HasPrefix(rt.Path, "/api/tokens/{id}"):
		id, perr := uuid.Parse(r.PathValue("id"))
		if perr != nil {
			return apierr.BadRequest(fmt.Sprintf("token id %q: want a UUID", apierr.Short(r.PathValue("id"))))
		}
		owner, err = tenant.TokenProject(ctx, g.Pool, id)
		if errors.Is(err, tenant.ErrNotFound) || (err == nil && owner != p.Project) {
			return apierr.NotFound(fmt.Sprintf("token %s: no such token", id))
		}
	default:
		return apierr.NotFound("no such " + rt.Path)
	}
	if err != nil {
		return apierr.UnavailableBecause("the database cannot be reached now; try again", err)
	}
	return nil
}
