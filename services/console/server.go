package main

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/events"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// access is who may call a route.
type access int

const (
	// public routes need no authentication.
	public access = iota
	// reader routes need any token or session.
	reader
	// admin routes change things: they need an admin across every
	// project, or a project's admin or operator (principal.CanAct).
	admin
	// manager routes manage a project's tokens: an admin across every
	// project, or the project's own admin.
	manager
)

// route is one API route; routes() is the list the server serves and the
// OpenAPI document must describe.
type route struct {
	method, path string
	access       access
	handle       http.HandlerFunc
}

// server is the console: the API handlers and what they use.
type server struct {
	cfg     *Config
	log     zerolog.Logger
	pool    *pgxpool.Pool
	objects *blob.Store
	// signer presigns what browsers fetch and upload (Config.presigner).
	signer *blob.Presigner
	pub    outbox.Publisher
	queues inspect.Inspector
	events *events.Hub
	auth   *auth.Auth
	logins *ratelimit.Limiter
	// page serves the web page for every path not under /api/.
	page http.Handler
	// extra are routes added by other features.
	extra []route
	// refused counts the refused requests for the audit (internal/auditlog).
	refused auditlog.Refusals
	// settings are the run-time settings in force (nil: the defaults).
	settings *setting.Watch
}

// routes lists every API route.
func (s *server) routes() []route {
	rs := []route{
		{"POST", "/api/login", public, s.audited("login", s.login)},
		{"GET", "/api/openapi.json", public, s.openapi},
		{"GET", "/api/session", reader, s.session},
		{"POST", "/api/logout", reader, s.audited("logout", s.logout)},
		{"POST", "/api/uploads", admin, s.createUpload},
		{"POST", "/api/tasks", admin, s.audited("submit", s.idempotent(s.createTask))},
		{"GET", "/api/tasks", reader, s.listTasks},
		{"GET", "/api/events", reader, s.allEvents},
		{"GET", "/api/system/health", reader, s.health},
		{"GET", "/api/engines", reader, s.listEngines},
		{"GET", "/api/dead-letters", reader, s.listDeadLetters},
		{"GET", "/api/dead-letters/{id}", reader, s.getDeadLetter},
		{"POST", "/api/dead-letters/{id}/replay", admin, s.audited("replay", s.replayDeadLetter)},
		{"POST", "/api/dead-letters/replay", admin, s.audited("replay", s.replayDeadLetters)},
		{"POST", "/api/dead-letters/purge", admin, s.audited("purge", s.purgeDeadLetters)},
		{"GET", "/api/metrics/history", reader, s.metricsHistory},
		{"GET", "/api/audit", reader, s.listAudit},
		{"GET", "/api/queues", reader, s.listQueues},
		{"POST", "/api/queues/{step}/pause", admin, s.audited("pause", s.pauseQueue)},
		{"POST", "/api/queues/{step}/resume", admin, s.audited("resume", s.resumeQueue)},
		{"GET", "/api/workers", reader, s.listWorkers},
		{"GET", "/api/compensations", reader, s.listCompensations},
		{"POST", "/api/compensations/requeue", admin, s.audited("requeue", s.requeueCompensations)},
		{"GET", "/api/waiting/projects", reader, s.waitingProxy("/queue/projects")},
		{"GET", "/api/waiting/projects/{id}/status", reader, s.waitingProxy("/queue/projects/{id}/status")},
		{"GET", "/api/waiting/agents/{agentId}/status", reader, s.waitingProxy("/queue/agents/{agentId}/status")},
		{"GET", "/api/waiting/entries/{id}", reader, s.waitingProxy("/queue/entries/{id}")},
		{"GET", "/api/config", reader, s.listSettings},
		{"PUT", "/api/config/{key}", admin, s.audited("config", s.putSetting)},
	}
	return append(append(append(append(rs, s.taskRoutes()...), s.reviewRoutes()...), s.projectRoutes()...), s.extra...)
}

// taskRoutes are the routes of one task, /api/tasks/{id}...: reads, and
// the operators' commands (audited).
func (s *server) taskRoutes() []route {
	read := func(sub string, h http.HandlerFunc) route { return route{"GET", "/api/tasks/{id}" + sub, reader, h} }
	command := func(action string, h http.HandlerFunc) route {
		return route{"POST", "/api/tasks/{id}/" + action, admin, s.audited(action, h)}
	}
	return []route{
		read("", s.getTask),
		read("/realtime-status", s.realtimeStatus),
		read("/events", s.taskEvents),
		read("/segments", s.taskSegments),
		read("/versions", s.taskVersions),
		read("/timeline", s.taskTimeline),
		read(sourceVideoPath, s.serveTaskFile(sourceVideoKey)),
		read(dubAudioPath, s.serveTaskFile(dubAudioKey)),
		command("cancel", taskCommand(s, http.StatusOK, s.cancelTask)),
		command("retry", s.retryTask),
		command("redub", taskCommand(s, http.StatusAccepted, s.redubTask)),
	}
}

// Handler serves the API under /api/ and the page everywhere else. Every
// answer carries X-Content-Type-Options: nosniff. A request under /api/
// that reaches no route is authenticated first (401 without a token or
// session), then answered 405 with Allow for a path served with other
// methods, 400 for a path with a "." or ".." segment (also %2e-encoded)
// or an empty one, and 404 otherwise; only the public routes' paths
// answer 405 without authentication.
func (s *server) Handler() http.Handler {
	if s.auth.Store == nil && s.pool != nil {
		s.auth.Store = s.pool // the projects' tokens
	}
	mux := http.NewServeMux()
	nr := noRoute{s: s, paths: http.NewServeMux(), methods: map[string][]string{}, public: map[string]bool{}}
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.guard(rt))
		if nr.methods[rt.path] == nil {
			nr.paths.Handle(rt.path, http.NotFoundHandler())
		}
		nr.methods[rt.path] = append(nr.methods[rt.path], rt.method)
		nr.public[rt.path] = nr.public[rt.path] || rt.access == public
	}
	mux.Handle("/api/", nr)
	page := s.page
	if page == nil {
		page = http.NotFoundHandler()
	}
	mux.Handle("/", page)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if strings.HasPrefix(r.URL.Path, "/api/") && !cleanPath(r.URL) {
			// Before the mux, which would redirect to the cleaned path.
			nr.answer(w, r, "", apierr.BadRequest("path: no \".\", \"..\" or empty segments (also %2e-encoded) in an API path"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// cleanPath reports whether u's path has no ".", ".." or empty segment,
// decoded or not.
func cleanPath(u *url.URL) bool {
	for _, p := range []string{u.Path, u.EscapedPath()} {
		segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i, seg := range segs {
			dots := strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
			if dots == "." || dots == ".." || (seg == "" && i < len(segs)-1) {
				return false
			}
		}
	}
	return true
}

// noRoute answers the requests under /api/ that no route serves.
type noRoute struct {
	s *server
	// paths matches the routes' path patterns whatever the method;
	// methods and public are each pattern's methods and whether a public
	// route serves it.
	paths   *http.ServeMux
	methods map[string][]string
	public  map[string]bool
}

func (nr noRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := nr.paths.Handler(r)
	if len(nr.methods[pattern]) == 0 {
		nr.answer(w, r, "", apierr.NotFound("no such API route: "+r.Method+" "+r.URL.Path))
		return
	}
	allowed := slices.Clone(nr.methods[pattern])
	if slices.Contains(allowed, http.MethodGet) {
		allowed = append(allowed, http.MethodHead)
	}
	slices.Sort(allowed)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	nr.answer(w, r, pattern, apierr.MethodNotAllowed(fmt.Sprintf("%s %s: this path answers %s", r.Method, pattern, strings.Join(allowed, ", "))))
}

// answer authenticates the request unless pattern is a public route's
// path, then answers err.
func (nr noRoute) answer(w http.ResponseWriter, r *http.Request, pattern string, err error) {
	if !nr.public[pattern] {
		rt := route{method: r.Method, path: "(no route)", access: reader}
		if _, ok := nr.s.authorize(w, r, rt); !ok {
			return
		}
	}
	nr.s.fail(w, r, err)
}

type principalKey struct{}

// guard authenticates and authorizes a request, then checks it against the
// route's part of the OpenAPI document (internal/contract), before rt handles it.
func (s *server) guard(rt route) http.Handler {
	op := apiContract[rt.method+" "+rt.path]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p principal
		if rt.access != public {
			var ok bool
			if p, ok = s.authorize(w, r, rt); !ok {
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		if err := op.CheckRequest(w, r, s.bodyLimit(op, r)); err != nil {
			if rt.method != http.MethodGet {
				s.refuse(w, r, rt, p, err) // counted with the refused requests
				return
			}
			s.fail(w, r, err)
			return
		}
		if err := s.owned(r, rt, p); err != nil {
			s.fail(w, r, err) // another project's id: 404, as for no such id
			return
		}
		rt.handle(w, r)
	})
}

// authorize finds the request's principal and checks it may call rt; it
// answers the refusal itself and returns false.
func (s *server) authorize(w http.ResponseWriter, r *http.Request, rt route) (principal, bool) {
	p, err := s.auth.Authenticate(r)
	if err != nil {
		s.refuse(w, r, rt, p, err)
		return p, false
	}
	if p.Session != "" {
		revoked, err := auth.Revoked(r.Context(), s.pool, p.Session)
		if err != nil {
			s.log.Error().Err(err).Str("path", apierr.CutEcho(r.URL.Path)).Msg("session check")
			s.fail(w, r, apierr.Unavailable("the session cannot be checked now; try again, or send Authorization: Bearer <token>"))
			return p, false
		}
		if revoked {
			s.refuse(w, r, rt, p, apierr.Unauthorized("session ended (logged out); log in again"))
			return p, false
		}
	}
	if err := permits(p, rt); err != nil {
		s.refuse(w, r, rt, p, err)
		return p, false
	}
	return p, true
}

// bodyLimit bounds the body of a request of op: MAX_VIDEO_BYTES and the
// form's fields for a multipart upload, the text fields' bounds for a
// task's JSON (maxTaskJSONBytes), 1 MiB for anything else.
func (s *server) bodyLimit(op *contract.Op, r *http.Request) int64 {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" && op != nil && slices.Contains(op.BodyTypes, mt) {
		return s.cfg.Limits.MaxVideoBytes + 4*maxFieldBytes
	}
	if r.Method == http.MethodPost && r.URL.Path == "/api/tasks" {
		return maxTaskJSONBytes
	}
	return jsonbody.MaxBytes
}

// principalOf returns who the request acts as (set by guard).
func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// fail answers err.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, s.log, err)
}
