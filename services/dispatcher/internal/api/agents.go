package api

import (
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// The per-agent queue (package agentqueue).

// agentEnqueueRequest is the body of POST /queue/agents/{agentId}/orders.
type agentEnqueueRequest struct {
	OrderID uuid.UUID `json:"orderId"`
	TaskID  uuid.UUID `json:"taskId"`
}

// agentEnqueue queues an order for an agent: 201 with the item; 400
// BUSINESS_QUEUE_FULL when the agent has QUEUE_MAX_N queued; 409
// BUSINESS_IDEMPOTENCY_VIOLATION when the order is already queued for it.
func (s *Server) agentEnqueue(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseUUID(w, "agentId", r.PathValue("agentId"))
	if !ok {
		return
	}
	var req agentEnqueueRequest
	if !decode(w, r, &req) {
		return
	}
	if req.OrderID == uuid.Nil || req.TaskID == uuid.Nil {
		writeError(w, http.StatusBadRequest, CodeValidation, "orderId and taskId are required UUIDs")
		return
	}
	it, err := s.aq.Enqueue(r.Context(), agent, req.OrderID, req.TaskID)
	s.reply(w, r, http.StatusCreated, it, err)
}

// agentConsumeNext hands out the agent's oldest queued item (200), or 204
// when there is none.
func (s *Server) agentConsumeNext(w http.ResponseWriter, r *http.Request) {
	agent, ok := parseUUID(w, "agentId", r.PathValue("agentId"))
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

// orderPosition answers {position} of the order in the queue of the agent
// named by the x-agent-id header; 404 when it is not queued there.
func (s *Server) orderPosition(w http.ResponseWriter, r *http.Request) {
	order, ok := parseUUID(w, "orderId", r.PathValue("orderId"))
	if !ok {
		return
	}
	agent, ok := parseUUID(w, "x-agent-id header", r.Header.Get("x-agent-id"))
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
	agent, ok := parseUUID(w, "agentId", r.PathValue("agentId"))
	if !ok {
		return
	}
	order, ok := parseUUID(w, "orderId", r.PathValue("orderId"))
	if !ok {
		return
	}
	user := strings.TrimSpace(r.Header.Get("x-user-id"))
	if user == "" || len(user) > 255 {
		writeError(w, http.StatusBadRequest, CodeValidation, "x-user-id header is required (at most 255 characters)")
		return
	}
	done, err := s.aq.Cancel(r.Context(), agent, order, user)
	s.reply(w, r, http.StatusOK, map[string]bool{"cancelled": done}, err)
}
