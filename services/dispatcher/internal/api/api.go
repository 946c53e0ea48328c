// Package api is the dispatcher's HTTP API: POST
// /internal/ai/events (manual_service.request), the queue's entries, each
// project's status and the list of every project's queue, the agents'
// presence, capacity and releases, and the per-agent queue. Every route requires the bearer token. Bad
// input is a 4xx, never a 500; every error answers {"code", "message"}.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// maxBody caps request bodies.
const maxBody = 1 << 20

// Error codes of the {"code", "message"} error body.
const (
	CodeValidation       = "VALIDATION_ERROR"               // 400: malformed or missing input
	CodeUnauthorized     = "UNAUTHORIZED"                   // 401: missing or wrong bearer token
	CodeNotFound         = "NOT_FOUND"                      // 404: no such route, entry, agent or queued order
	CodeTooLarge         = "PAYLOAD_TOO_LARGE"              // 413: body over 1 MiB
	CodeQueueFull        = "BUSINESS_QUEUE_FULL"            // 400: the agent already has QUEUE_MAX_N queued
	CodeIdempotency      = "BUSINESS_IDEMPOTENCY_VIOLATION" // 409: already queued / already waiting
	CodeNotWaiting       = "BUSINESS_NOT_WAITING"           // 409: the entry was assigned or expired
	CodeNothingToRelease = "BUSINESS_NOTHING_TO_RELEASE"    // 409: the agent holds no conversation
	CodeNotAssigned      = "BUSINESS_NOT_ASSIGNED"          // 409: confirm/release of an entry that is not assigned
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
}

// New returns a Server; token is the bearer token every request must carry.
func New(q *queue.Queue, aq *agentqueue.Queue, token string, log zerolog.Logger) *Server {
	return &Server{q: q, aq: aq, token: token, log: log}
}

// Handler returns the API's routes, behind the token check.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/ai/events", s.aiEvent)
	mux.HandleFunc("GET /queue/entries/{id}", byID(s, "id", s.q.Entry, reply))
	mux.HandleFunc("DELETE /queue/entries/{id}", byID(s, "id", s.q.Cancel, reply))
	// Confirming an assignment: its reservation no longer expires.
	mux.HandleFunc("POST /queue/entries/{id}/confirm", byID(s, "id", s.q.Confirm, reply))
	mux.HandleFunc("POST /queue/entries/{id}/release", s.releaseEntry)
	mux.HandleFunc("GET /queue/projects", s.listProjects)
	mux.HandleFunc("GET /queue/projects/{id}/status", s.projectStatus)
	mux.HandleFunc("PUT /staff/{id}", s.putStaff)
	mux.HandleFunc("GET /staff/{id}", byID(s, "id", s.q.Staff, reply))
	mux.HandleFunc("POST /staff/{id}/release", byID(s, "id", s.q.Release, s.matchAndReply))
	mux.HandleFunc("POST /queue/agents/{agentId}/orders", s.agentEnqueue)
	mux.HandleFunc("POST /queue/agents/{agentId}/consume-next", s.agentConsumeNext)
	// {agentId, queuedCount, capacity, available, items}
	mux.HandleFunc("GET /queue/agents/{agentId}/status", byID(s, "agentId", s.aq.Status, reply))
	mux.HandleFunc("GET /queue/orders/{orderId}/position", s.orderPosition)
	mux.HandleFunc("DELETE /queue/agents/{agentId}/orders/{orderId}", s.agentCancel)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s.auth(mux)
}

// auth checks the bearer token in constant time.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dispatcher"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// aiEventRequest is the AI event of POST /internal/ai/events.
type aiEventRequest struct {
	EventType string    `json:"event_type"`
	ProjectID uuid.UUID `json:"project_id"`
	VisitorID uuid.UUID `json:"visitor_id"`
	Payload   queue.Ask `json:"payload"`
}

// aiEventResponse answers POST /internal/ai/events.
type aiEventResponse struct {
	EntryID     uuid.UUID  `json:"entry_id"`
	Status      string     `json:"status"`
	Position    int        `json:"position"`
	Priority    int        `json:"priority"`
	ChannelID   string     `json:"channel_id"`
	ChannelType *int       `json:"channel_type"`
	StaffID     *uuid.UUID `json:"assigned_staff_id"`
}

// EventManualServiceRequest is the only AI event type the dispatcher takes.
const EventManualServiceRequest = "manual_service.request"

func (s *Server) aiEvent(w http.ResponseWriter, r *http.Request) {
	var req aiEventRequest
	if !decode(w, r, &req) {
		return
	}
	if req.EventType != EventManualServiceRequest {
		writeError(w, http.StatusBadRequest, CodeValidation, fmt.Sprintf("unknown event_type %q (want %q)", req.EventType, EventManualServiceRequest))
		return
	}
	er, err := req.Payload.Request(req.ProjectID, req.VisitorID, queue.SourceAIRequest)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return
	}
	if err := er.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return
	}
	e, err := s.q.Enqueue(r.Context(), er)
	var dup *queue.DuplicateError
	if errors.As(err, &dup) {
		writeJSON(w, http.StatusConflict, map[string]any{
			"code": CodeIdempotency, "message": dup.Error(), "entry_id": dup.Existing.ID, "status": dup.Existing.Status,
			"position": dup.Existing.Position, "priority": dup.Existing.Priority,
		})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The immediate trigger: match now, and count the attempt if no agent
	// was free. A failure here leaves the entry waiting for the scan.
	if out, err := s.q.Process(r.Context(), e.ID, false); err != nil {
		s.log.Warn().Err(err).Str("entry_id", e.ID.String()).Msg("immediate processing failed; the scan will retry")
	} else {
		s.assigned(len(out.Assigned))
		e = out.Entry
	}
	writeJSON(w, http.StatusOK, aiEventResponse{
		EntryID: e.ID, Status: string(e.Status), Position: e.Position, Priority: e.Priority,
		ChannelID: e.ChannelID, ChannelType: e.ChannelType, StaffID: e.AssignedStaffID,
	})
}

// releaseEntry ends an assigned conversation and gives the agent's unit
// back, once however often it is called; then matches the project.
func (s *Server) releaseEntry(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	e, released, err := s.q.ReleaseAssignment(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if released {
		a, err := s.q.Match(r.Context(), e.ProjectID)
		s.assigned(len(a))
		if err != nil {
			s.log.Warn().Err(err).Str("project_id", e.ProjectID.String()).Msg("matching after a release failed; the scan will retry")
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"released": released, "entry": e})
}

// queryLimit reads the limit parameter (0..10000, default 1000); false
// when it answered a bad one.
func queryLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 1000, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 10000 {
		writeError(w, http.StatusBadRequest, CodeValidation, "limit must be an integer between 0 and 10000")
		return 0, false
	}
	return n, true
}

// listProjects answers every project with waiting entries or agents, the
// longest waits first (read-only).
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryLimit(w, r)
	if !ok {
		return
	}
	ps, err := s.q.Projects(r.Context(), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ps == nil {
		ps = []queue.ProjectQueue{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": ps})
}

func (s *Server) projectStatus(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	limit, ok := queryLimit(w, r)
	if !ok {
		return
	}
	st, err := s.q.Status(r.Context(), id, limit)
	s.reply(w, r, http.StatusOK, st, err)
}

// staffRequest is the body of PUT /staff/{id}.
type staffRequest struct {
	ProjectID     uuid.UUID `json:"project_id"`
	Availability  string    `json:"availability"`
	MaxConcurrent *int      `json:"max_concurrent"`
}

func (s *Server) putStaff(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	var req staffRequest
	if !decode(w, r, &req) {
		return
	}
	if req.MaxConcurrent == nil {
		writeError(w, http.StatusBadRequest, CodeValidation, "max_concurrent is required")
		return
	}
	u := queue.StaffUpdate{ID: id, ProjectID: req.ProjectID,
		Availability: queue.Availability(req.Availability), MaxConcurrent: *req.MaxConcurrent}
	if err := u.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return
	}
	st, err := s.q.PutStaff(r.Context(), u)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.matchAndReply(w, r, st)
}

// matchAndReply matches the agent's project (capacity may have freed up)
// and answers with the agent as it is afterwards.
func (s *Server) matchAndReply(w http.ResponseWriter, r *http.Request, st queue.Staff) {
	if st.FreeCapacity > 0 {
		a, err := s.q.Match(r.Context(), st.ProjectID)
		s.assigned(len(a))
		if err != nil {
			s.log.Warn().Err(err).Str("project_id", st.ProjectID.String()).Msg("matching after a capacity change failed; the scan will retry")
		}
		// Re-read even when this call assigned nothing: a concurrent
		// matcher (the scan, another process) may have used the capacity.
		if now, err := s.q.Staff(r.Context(), st.ID); err == nil {
			st = now
		}
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) assigned(n int) {
	if n > 0 && s.Assigned != nil {
		s.Assigned(n)
	}
}

// reply answers v with code, or the error's answer when err is not nil.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, code int, v any, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, code, v)
}

// fail maps domain errors to 4xx and anything else to a logged 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, queue.ErrInvalid):
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
	case errors.Is(err, agentqueue.ErrQueueFull):
		writeError(w, http.StatusBadRequest, CodeQueueFull, err.Error())
	case errors.Is(err, agentqueue.ErrDuplicate):
		writeError(w, http.StatusConflict, CodeIdempotency, err.Error())
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, agentqueue.ErrNotQueued):
		writeError(w, http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, queue.ErrNotWaiting):
		writeError(w, http.StatusConflict, CodeNotWaiting, err.Error())
	case errors.Is(err, queue.ErrNotAssigned):
		writeError(w, http.StatusConflict, CodeNotAssigned, err.Error())
	case errors.Is(err, queue.ErrNothingToRelease):
		writeError(w, http.StatusConflict, CodeNothingToRelease, err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, 499, CodeCanceled, "request canceled")
	default:
		s.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("request failed")
		writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
	}
}

// byID is the handler of a route that does one thing to the UUID in path
// value param: a malformed one is a 400, an error of do answers as fail
// maps it, and reply answers do's result.
func byID[T any](s *Server, param string, do func(context.Context, uuid.UUID) (T, error),
	reply func(http.ResponseWriter, *http.Request, T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := parseUUID(w, param, r.PathValue(param))
		if !ok {
			return
		}
		v, err := do(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		reply(w, r, v)
	}
}

// reply answers 200 with v.
func reply[T any](w http.ResponseWriter, _ *http.Request, v T) {
	writeJSON(w, http.StatusOK, v)
}

// pathUUID reads the {id} path value.
func pathUUID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	return parseUUID(w, "id", r.PathValue("id"))
}

// parseUUID parses a UUID named name, answering 400 itself when it is
// missing or malformed.
func parseUUID(w http.ResponseWriter, name, raw string) (uuid.UUID, bool) {
	id, err := uuid.Parse(raw)
	if err != nil || id == uuid.Nil {
		writeError(w, http.StatusBadRequest, CodeValidation, fmt.Sprintf("%s %q: want a UUID", name, raw))
		return uuid.Nil, false
	}
	return id, true
}

// decode reads a JSON body into v, answering 400 or 413 itself on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "request body too large")
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, "read body: "+err.Error())
		return false
	}
	if len(body) == 0 {
		writeError(w, http.StatusBadRequest, CodeValidation, "missing JSON body")
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
