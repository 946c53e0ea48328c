package main

import (
	"context"
	"net/http"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/setting"
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
	// admin routes need the admin token or an admin session.
	admin
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
	queues queueInspector
	events *hub
	auth   *auth
	logins *loginLimiter
	// page serves the web page for every path not under /api/.
	page http.Handler
	// extra are routes added by other features.
	extra []route
	// refused counts the refused requests for the audit (refusals.go).
	refused refusals
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
		{"POST", "/api/tasks", admin, s.audited("submit", s.createTask)},
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
	return append(append(rs, s.taskRoutes()...), s.extra...)
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
		command("cancel", taskCommand(s, http.StatusOK, s.cancelTask)),
		command("retry", s.retryTask),
		command("redub", taskCommand(s, http.StatusAccepted, s.redubTask)),
	}
}

// Handler serves the API under /api/ and the page everywhere else.
func (s *server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.guard(rt))
	}
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, notFound("no such API route: "+r.Method+" "+r.URL.Path))
	})
	page := s.page
	if page == nil {
		page = http.NotFoundHandler()
	}
	mux.Handle("/", page)
	return mux
}

type principalKey struct{}

// guard authenticates and authorizes a request before rt handles it.
func (s *server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.access == public {
			rt.handle(w, r)
			return
		}
		p, err := s.auth.authenticate(r)
		if err != nil {
			s.refuse(w, r, rt, p, err)
			return
		}
		if p.session != "" {
			revoked, err := s.revoked(r.Context(), p.session)
			if err != nil {
				s.log.Error().Err(err).Str("path", r.URL.Path).Msg("session check")
				s.fail(w, r, unavailable("the session cannot be checked now; try again, or send Authorization: Bearer <token>"))
				return
			}
			if revoked {
				s.refuse(w, r, rt, p, unauthorized("session ended (logged out); log in again"))
				return
			}
		}
		if rt.access == admin && p.role != roleAdmin {
			s.refuse(w, r, rt, p, forbidden("forbidden", "this token is read-only"))
			return
		}
		rt.handle(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
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
