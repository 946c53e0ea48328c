package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
)

// The per-agent queue (package agentqueue). Seed 002's roles: the order's
// creator ("A") names itself in x-user-id, the agent ("B") in x-agent-id;
// both headers are set by whoever fronts this API (it holds the token).

// agentEnqueueRequest is the body of POST /queue/agents/{agentId}/orders;
// the ids are read as text and parsed by queue.ParseID.
type agentEnqueueRequest struct {
	OrderID string `json:"orderId"`
	TaskID  string `json:"taskId"`
}

// agentEnqueue queues an outside order for an agent on behalf of the
// x-user-id header (who alone may cancel it): 201 with the item; 400
// BUSINESS_QUEUE_FULL when the agent has QUEUE_MAX_N queued; 409
// BUSINESS_IDEMPOTENCY_VIOLATION when the order is already queued for it.
func (s *Server) agentEnqueue(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseID(w, "agentId", r.PathValue("agentId"))
	if !ok {
		return
	}
	user, ok := userHeader(w, r, true)
	if !ok {
		return
	}
	var req agentEnqueueRequest
	if !decode(w, r, &req) {
		return
	}
	order, ok := parseID(w, "orderId", req.OrderID)
	if !ok {
		return
	}
	task, ok := parseID(w, "taskId", req.TaskID)
	if !ok {
		return
	}
	it, err := s.aq.Enqueue(r.Context(), agent, order, task, user)
	s.reply(w, r, http.StatusCreated, it, err)
}

// userHeader reads the x-user-id header (one line of 1..255 characters),
// answering 400 itself when it is malformed, or missing and required.
// present is false when it is absent and not required.
func userHeader(w http.ResponseWriter, r *http.Request, required bool) (user string, ok bool) {
	vs, present := r.Header[http.CanonicalHeaderKey("x-user-id")]
	if !present && !required {
		return "", true
	}
	if len(vs) > 0 {
		user = strings.TrimSpace(vs[0])
	}
	if user == "" {
		writeError(w, http.StatusBadRequest, CodeValidation, "x-user-id header is required (who queued the order, at most 255 characters)")
		return "", false
	}
	if err := queue.CheckLine("x-user-id header", user, queue.MaxActor); err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return "", false
	}
	return user, true
}

// agentConsumeNext hands out the agent's oldest queued outside order
// (200), or 204 when there is none.
func (s *Server) agentConsumeNext(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseID(w, "agentId", r.PathValue("agentId"))
	if !ok {
		return
	}
	it, found, err := s.aq.ConsumeNext(r.Context(), agent)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !found {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// publicItem is an item as the agent's status shows it without the token:
// where it stands and since when, nothing that names the order, its task,
// who queued it or a visitor.
type publicItem struct {
	Status    string    `json:"status"`
	Position  int       `json:"position"`
	CreatedAt time.Time `json:"createdAt"`
}

// publicStatus is the agent's status without the token.
type publicStatus struct {
	AgentID     uuid.UUID    `json:"agentId"`
	QueuedCount int          `json:"queuedCount"`
	Capacity    int          `json:"capacity"`
	Available   int          `json:"available"`
	Items       []publicItem `json:"items"`
}

// agentStatus answers the agent's queue: counts and at most ?limit= items.
// Public by default (seed 002; QUEUE_AGENT_STATUS_PUBLIC): without the
// token (or with a wrong one) the items say only their status, position
// and arrival; with the token they are whole.
func (s *Server) agentStatus(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseID(w, "agentId", r.PathValue("agentId"))
	if !ok {
		return
	}
	st, err := s.aq.Status(r.Context(), agent, limitOf(r))
	if err != nil || s.tokenOK(r) {
		s.reply(w, r, http.StatusOK, st, err)
		return
	}
	out := publicStatus{AgentID: st.AgentID, QueuedCount: st.QueuedCount, Capacity: st.Capacity,
		Available: st.Available, Items: make([]publicItem, 0, len(st.Items))}
	for _, it := range st.Items {
		out.Items = append(out.Items, publicItem{Status: it.Status, Position: it.Position, CreatedAt: it.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

// orderPosition answers {position} of the order in the queue of the agent
// named by the x-agent-id header (404 when it is not queued there). An
// x-user-id header, when given, must be who queued it (403 otherwise):
// seed 002's "A/B" — the agent asks by x-agent-id alone, the order's
// creator names itself too.
func (s *Server) orderPosition(w http.ResponseWriter, r *http.Request) {
	order, ok := parseID(w, "orderId", r.PathValue("orderId"))
	if !ok {
		return
	}
	agent, ok := parseID(w, "x-agent-id header", r.Header.Get("x-agent-id"))
	if !ok {
		return
	}
	user, ok := userHeader(w, r, false)
	if !ok {
		return
	}
	if user != "" {
		it, err := s.aq.Queued(r.Context(), agent, order)
		if err == nil && !owns(it, user) {
			err = errNotOwner(order)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	pos, err := s.aq.Position(r.Context(), agent, order)
	s.reply(w, r, http.StatusOK, map[string]int{"position": pos}, err)
}

// owns reports whether user queued it (an item queued before owners were
// recorded is anyone's).
func owns(it agentqueue.Item, user string) bool {
	return it.UserID == nil || *it.UserID == agentqueue.User(user)
}

func errNotOwner(order uuid.UUID) error {
	return fmt.Errorf("x-user-id is not who queued order %s: %w", order, agentqueue.ErrNotOwner)
}

// agentCancel cancels a queued order on behalf of the x-user-id header,
// who must be who queued it (403 otherwise); an x-agent-id header, when
// given, must be the path's agent (403 otherwise). A visitor queued for
// the agent (an item standing for an entry) is cancelled with its entry.
// An order that is not queued (unknown, consumed, cancelled) is a quiet
// success: {"cancelled": false}.
func (s *Server) agentCancel(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseID(w, "agentId", r.PathValue("agentId"))
	if !ok {
		return
	}
	order, ok := parseID(w, "orderId", r.PathValue("orderId"))
	if !ok {
		return
	}
	user, ok := userHeader(w, r, true)
	if !ok || !s.agentHeaderIs(w, r, agent) {
		return
	}
	it, err := s.aq.Queued(r.Context(), agent, order)
	switch {
	case errors.Is(err, agentqueue.ErrNotQueued):
		writeJSON(w, http.StatusOK, map[string]bool{"cancelled": false})
		return
	case err == nil && !owns(it, user):
		err = errNotOwner(order)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var done bool
	if it.EntryID != nil {
		var e queue.Entry
		e, err = s.q.CancelBy(r.Context(), *it.EntryID, user)
		done = err == nil && e.Status == queue.StatusCancelled
		if errors.Is(err, queue.ErrNotWaiting) {
			err = nil // paired meanwhile: no longer queued
		}
	} else {
		done, err = s.aq.Cancel(r.Context(), agent, order, user)
	}
	s.reply(w, r, http.StatusOK, map[string]bool{"cancelled": done}, err)
}

// agentHeaderIs checks an x-agent-id header, when given: a canonical UUID
// naming agent. It answers 400 or 403 itself.
func (s *Server) agentHeaderIs(w http.ResponseWriter, r *http.Request, agent uuid.UUID) bool {
	vs, present := r.Header[http.CanonicalHeaderKey("x-agent-id")]
	if !present {
		return true
	}
	raw := ""
	if len(vs) > 0 {
		raw = vs[0]
	}
	got, ok := parseID(w, "x-agent-id header", raw)
	if ok && got != agent {
		writeError(w, http.StatusForbidden, CodeForbidden, "x-agent-id names another agent than the path's agentId")
		return false
	}
	return ok
}
