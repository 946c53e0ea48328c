package api

import (
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
)

// The per-agent queue (package agentqueue).

// agentEnqueueRequest is the body of POST /queue/agents/{agentId}/orders;
// the ids are read as text and parsed by queue.ParseID.
type agentEnqueueRequest struct {
	OrderID string `json:"orderId"`
	TaskID  string `json:"taskId"`
}

// agentEnqueue queues an order for an agent: 201 with the item; 400
// BUSINESS_QUEUE_FULL when the agent has QUEUE_MAX_N queued; 409
// BUSINESS_IDEMPOTENCY_VIOLATION when the order is already queued for it.
func (s *Server) agentEnqueue(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseID(w, "agentId", r.PathValue("agentId"))
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
	it, err := s.aq.Enqueue(r.Context(), agent, order, task)
	s.reply(w, r, http.StatusCreated, it, err)
}

// agentConsumeNext hands out the agent's oldest queued item (200), or 204
// when there is none.
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

// agentStatus answers the agent's queue: counts and at most ?limit= items.
func (s *Server) agentStatus(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseID(w, "agentId", r.PathValue("agentId"))
	if !ok {
		return
	}
	st, err := s.aq.Status(r.Context(), agent, limitOf(r))
	s.reply(w, r, http.StatusOK, st, err)
}

// orderPosition answers {position} of the order in the queue of the agent
// named by the x-agent-id header; 404 when it is not queued there.
func (s *Server) orderPosition(w http.ResponseWriter, r *http.Request) {
	order, ok := parseID(w, "orderId", r.PathValue("orderId"))
	if !ok {
		return
	}
	agent, ok := parseID(w, "x-agent-id header", r.Header.Get("x-agent-id"))
	if !ok {
		return
	}
	pos, err := s.aq.Position(r.Context(), agent, order)
	s.reply(w, r, http.StatusOK, map[string]int{"position": pos}, err)
}

// agentCancel cancels a queued order; the x-user-id header names who did.
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
	user := strings.TrimSpace(r.Header.Get("x-user-id"))
	if user == "" {
		writeError(w, http.StatusBadRequest, CodeValidation, "x-user-id header is required (who cancels, at most 255 characters)")
		return
	}
	if err := queue.CheckLine("x-user-id header", user, queue.MaxActor); err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return
	}
	done, err := s.aq.Cancel(r.Context(), agent, order, user)
	s.reply(w, r, http.StatusOK, map[string]bool{"cancelled": done}, err)
}
