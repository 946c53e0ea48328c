// Package api is the dispatcher's HTTP API: POST
// /internal/ai/events (manual_service.request), the queue's entries, each
// project's status and the list of every project's queue, the agents'
// presence, capacity and releases, and the per-agent queue. Every route but
// GET /openapi.json requires the bearer token. Bad input is a 4xx, never a
// 500; every error answers {"code", "message"} with a code documented in
// openapi.json (a test runs every route against it).
package api

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/rs/zerolog"
)

// maxBody caps request bodies.
const maxBody = 1 << 20

// Error codes of the {"code", "message"} error body.
const (
	CodeValidation       = "VALIDATION_ERROR"               // 400: malformed or missing input
	CodeUnauthorized     = "UNAUTHORIZED"                   // 401: missing or wrong bearer token
	CodeForbidden        = "FORBIDDEN"                      // 403: x-user-id / x-agent-id do not match the order
	CodeNotFound         = "NOT_FOUND"                      // 404: no such route, entry, agent or queued order
	CodeMethod           = "METHOD_NOT_ALLOWED"             // 405: the path is served, not with this method
	CodeTooLarge         = "PAYLOAD_TOO_LARGE"              // 413: body over 1 MiB
	CodeMediaType        = "UNSUPPORTED_MEDIA_TYPE"         // 415: a body that is not application/json
	CodeQueueFull        = "BUSINESS_QUEUE_FULL"            // 400: the agent already has QUEUE_MAX_N queued
	CodeIdempotency      = "BUSINESS_IDEMPOTENCY_VIOLATION" // 409: already queued / already waiting
	CodeNotWaiting       = "BUSINESS_NOT_WAITING"           // 409: the entry was assigned, released or expired
	CodeNothingToRelease = "BUSINESS_NOTHING_TO_RELEASE"    // 409: the agent holds no conversation
	CodeNotAssigned      = "BUSINESS_NOT_ASSIGNED"          // 409: confirm/release of an entry that is not assigned
	CodeAgentBusy        = "BUSINESS_AGENT_BUSY"            // 409: moving an agent that holds conversations
	CodeCanceled         = "REQUEST_CANCELED"               // 499: the client went away
	CodeInternal         = "INTERNAL_ERROR"                 // 500: logged; nothing else is said
)

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Server serves the API on a Queue.
type Server struct {
	q     *queue.Queue
	aq    *agentqueue.Queue
	token string
	log   zerolog.Logger
	// Assigned is called with every assignment the API's requests made
	// (metrics); it may be nil.
	Assigned func(n int)
	// AgentStatusPrivate makes GET /queue/agents/{agentId}/status need the
	// token like every other route (QUEUE_AGENT_STATUS_PUBLIC=false); by
	// default it is public, as seed 002 has it, and shows the token-less
	// caller no id but the agent's (agentStatus).
	AgentStatusPrivate bool
}

// New returns a Server; token is the bearer token every request must carry.
func New(q *queue.Queue, aq *agentqueue.Queue, token string, log zerolog.Logger) *Server {
	return &Server{q: q, aq: aq, token: token, log: log}
}

// Route is one route of the API: what openapi.json must describe and what
// the server checks before the handler runs.
type Route struct {
	Method, Path string
	// Public routes need no token.
	Public bool
	// Body: the route reads a JSON body (Content-Type checked).
	Body bool
	// Limit is the largest ?limit= the route takes (also its default);
	// 0 when it takes none. Every list an answer holds is bounded by it.
	Limit int
	// Query names the query parameters the route takes besides limit;
	// any other is refused.
	Query []string

	handle http.HandlerFunc
}

// Routes lists every route the API serves.
func (s *Server) Routes() []Route {
	return []Route{
		{Method: "GET", Path: "/openapi.json", Public: true, handle: serveOpenAPI},
		{Method: "POST", Path: "/internal/ai/events", Body: true, handle: s.aiEvent},
		{Method: "GET", Path: "/queue/entries/{id}", handle: byID(s, "id", s.q.Entry, reply)},
		{Method: "DELETE", Path: "/queue/entries/{id}", handle: byID(s, "id", s.q.Cancel, reply)},
		// Confirming an assignment: its reservation no longer expires.
		{Method: "POST", Path: "/queue/entries/{id}/confirm", handle: byID(s, "id", s.q.Confirm, reply)},
		{Method: "POST", Path: "/queue/entries/{id}/release", handle: s.releaseEntry},
		{Method: "GET", Path: "/queue/projects", Limit: maxProjects, handle: s.listProjects},
		{Method: "GET", Path: "/queue/projects/{id}/status", Limit: maxStatusItems, handle: s.projectStatus},
		{Method: "PUT", Path: "/staff/{id}", Body: true, handle: s.putStaff},
		{Method: "GET", Path: "/staff/{id}", handle: byID(s, "id", s.q.Staff, reply)},
		{Method: "POST", Path: "/staff/{id}/release", handle: s.releaseStaff},
		{Method: "POST", Path: "/queue/agents/{agentId}/orders", Body: true, handle: s.agentEnqueue},
		{Method: "POST", Path: "/queue/agents/{agentId}/consume-next", handle: s.agentConsumeNext},
		// {agentId, queuedCount, capacity, available, items}
		{Method: "GET", Path: "/queue/agents/{agentId}/status", Limit: maxAgentItems, Public: !s.AgentStatusPrivate, handle: s.agentStatus},
		{Method: "GET", Path: "/queue/orders/{orderId}/position", handle: s.orderPosition},
		{Method: "DELETE", Path: "/queue/agents/{agentId}/orders/{orderId}", handle: s.agentCancel},
	}
}

// Handler returns the API. Every request goes through, in order: a clean
// path (400 for '.', '..' or empty segments, decoded or not), the size of a
// declared body (413), the token (401; GET /openapi.json needs none), the
// route (404 for an unknown path, 405 with Allow for another method), the
// route's query parameters (400) and content type (415), then its handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	public := http.NewServeMux()
	for _, rt := range s.Routes() {
		mux.Handle(rt.Method+" "+rt.Path, guard(rt))
		if rt.Public {
			public.Handle(rt.Method+" "+rt.Path, guard(rt))
		}
	}
	routed := s.auth(public, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveRoute(mux, w, r) }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		switch {
		case !cleanPath(r.URL.Path):
			writeError(w, http.StatusBadRequest, CodeValidation, "path: '.', '..' and empty segments are not allowed")
		case r.ContentLength > maxBody:
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "request body too large (at most 1 MiB)")
		default:
			routed.ServeHTTP(w, r)
		}
	})
}

// serveRoute serves r through mux, or answers 404 (no route) or 405 (the
// path is served with other methods, listed in Allow) itself.
func serveRoute(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	if _, pattern := mux.Handler(r); pattern != "" {
		mux.ServeHTTP(w, r)
		return
	}
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such route")
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, CodeMethod, r.Method+" is not served here (allowed: "+strings.Join(allow, ", ")+")")
}

// cleanPath reports whether p has no '.', '..' or empty segment (a
// trailing slash aside). http.ServeMux would answer such a path with a
// redirect to its cleaned form, which no client of this API wants.
func cleanPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	segs := strings.Split(strings.TrimSuffix(p[1:], "/"), "/")
	for i, seg := range segs {
		if seg == "." || seg == ".." || (seg == "" && !(i == 0 && len(segs) == 1)) {
			return false
		}
	}
	return true
}

// auth checks the bearer token in constant time; the public routes are
// served without it.
func (s *Server) auth(public *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := public.Handler(r); pattern != "" {
			public.ServeHTTP(w, r)
			return
		}
		if !s.tokenOK(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dispatcher"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tokenOK reports whether the request carries the bearer token (compared
// in constant time).
func (s *Server) tokenOK(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && s.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// guard checks what the route declares before its handler runs: its query
// parameters (known, given once, limit within bounds) and, for a route
// with a body, the content type.
func guard(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, err := checkQuery(r, rt)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
			return
		}
		if rt.Body && !jsonContent(r.Header.Get("Content-Type")) {
			writeError(w, http.StatusUnsupportedMediaType, CodeMediaType, "the body must be application/json")
			return
		}
		if rt.Limit > 0 {
			r = r.WithContext(context.WithValue(r.Context(), limitKey{}, limit))
		}
		rt.handle(w, r)
	})
}
