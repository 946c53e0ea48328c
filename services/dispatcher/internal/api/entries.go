package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
)

// The unified waiting queue: the AI event, entries, projects, agents.

// aiEventRequest is the AI event of POST /internal/ai/events. The ids are
// read as text and admitted by queue.Ask.Admit, as the waiting.enqueue
// message is.
type aiEventRequest struct {
	EventType string    `json:"event_type"`
	ProjectID string    `json:"project_id"`
	VisitorID string    `json:"visitor_id"`
	Payload   aiPayload `json:"payload"`
}

// aiPayload is the event's payload: a visitor's request (queue.Ask) and,
// for a transfer_to_human, the agent it names.
type aiPayload struct {
	queue.Ask
	StaffID *string `json:"staff_id"`
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

// The AI event types the dispatcher takes.
const (
	// EventManualServiceRequest (seed 000's AI request): the visitor is
	// queued, then matched at once.
	EventManualServiceRequest = "manual_service.request"
	// EventTransferToHuman (seed 000's transfer_to_human()): the visitor
	// is assigned at once when an agent is free, else enqueued with source
	// no_staff and the reason; the answer is the seed's TransferResult.
	EventTransferToHuman = "transfer_to_human"
)

func (s *Server) aiEvent(w http.ResponseWriter, r *http.Request) {
	var req aiEventRequest
	if !decode(w, r, &req) {
		return
	}
	if req.EventType != EventManualServiceRequest && req.EventType != EventTransferToHuman {
		writeError(w, http.StatusBadRequest, CodeValidation, fmt.Sprintf("unknown event_type %s (want %q or %q)",
			quoted(req.EventType), EventManualServiceRequest, EventTransferToHuman))
		return
	}
	er, err := req.Payload.Admit(req.ProjectID, req.VisitorID, queue.SourceAIRequest)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return
	}
	if req.EventType == EventTransferToHuman {
		s.transfer(w, r, er, req.Payload.StaffID)
		return
	}
	if req.Payload.StaffID != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, "payload.staff_id: only a transfer_to_human names an agent")
		return
	}
	e, err := s.q.Enqueue(r.Context(), er)
	if err != nil {
		s.failEnqueue(w, r, err)
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

// transfer runs seed 000's transfer_to_human() for the request (to the
// agent named by staffID when given) and answers its TransferResult.
func (s *Server) transfer(w http.ResponseWriter, r *http.Request, er queue.EnqueueRequest, staffID *string) {
	var agent *uuid.UUID
	if staffID != nil {
		id, ok := parseID(w, "payload.staff_id", *staffID)
		if !ok {
			return
		}
		agent = &id
	}
	res, err := s.q.Transfer(r.Context(), er, agent)
	if err != nil {
		s.failEnqueue(w, r, err)
		return
	}
	if res.Status == queue.StatusAssigned {
		s.assigned(1)
	}
	writeJSON(w, http.StatusOK, res)
}

// failEnqueue answers a refused enqueue: a visitor already active in the
// project is a 409 naming its entry; anything else as fail maps it.
func (s *Server) failEnqueue(w http.ResponseWriter, r *http.Request, err error) {
	var dup *queue.DuplicateError
	if !errors.As(err, &dup) {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusConflict, map[string]any{
		"code": CodeIdempotency, "message": dup.Error(), "entry_id": dup.Existing.ID, "status": dup.Existing.Status,
		"position": dup.Existing.Position, "priority": dup.Existing.Priority,
	})
}

// releaseEntry ends an assigned conversation and gives the agent's unit
// back, once however often it is called — to the oldest visitor queued for
// that agent, in the same transaction ("paired"); then matches the
// project.
func (s *Server) releaseEntry(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	rel, err := s.q.ReleaseEntry(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.assigned(len(rel.Paired))
	if rel.Released {
		a, err := s.q.Match(r.Context(), rel.Entry.ProjectID)
		s.assigned(len(a))
		if err != nil {
			s.log.Warn().Err(err).Str("project_id", rel.Entry.ProjectID.String()).Msg("matching after a release failed; the scan will retry")
		}
	}
	var paired *queue.Entry
	if len(rel.Paired) > 0 {
		paired = &rel.Paired[0]
	}
	writeJSON(w, http.StatusOK, map[string]any{"released": rel.Released, "entry": rel.Entry, "paired": paired})
}

// releaseStaff ends the agent's oldest conversation (its unit going to
// the oldest visitor queued for it, in the same transaction), then matches
// its project and answers the agent.
func (s *Server) releaseStaff(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	st, paired, err := s.q.ReleaseStaff(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.assigned(len(paired))
	s.matchAndReply(w, r, st)
}

// listProjects answers every project with waiting entries or agents, the
// longest waits first (read-only), at most ?limit= of them.
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	ps, err := s.q.Projects(r.Context(), limitOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ps == nil {
		ps = []queue.ProjectQueue{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": ps})
}

// projectStatus answers a project's queue: counts, and at most ?limit=
// entries and agents.
func (s *Server) projectStatus(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	st, err := s.q.Status(r.Context(), id, limitOf(r))
	s.reply(w, r, http.StatusOK, st, err)
}

// staffRequest is the body of PUT /staff/{id}.
type staffRequest struct {
	ProjectID     string `json:"project_id"`
	Availability  string `json:"availability"`
	MaxConcurrent *int   `json:"max_concurrent"`
}

func (s *Server) putStaff(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var req staffRequest
	if !decode(w, r, &req) {
		return
	}
	project, ok := parseID(w, "project_id", req.ProjectID)
	if !ok {
		return
	}
	if req.MaxConcurrent == nil {
		writeError(w, http.StatusBadRequest, CodeValidation, "max_concurrent is required")
		return
	}
	u := queue.StaffUpdate{ID: id, ProjectID: project,
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

// matchAndReply follows a change of the agent (queue.Rematch: visitors
// queued for an agent gone offline or moved go back to their project's
// queue; capacity may have freed up) and answers with the agent as it is
// afterwards.
func (s *Server) matchAndReply(w http.ResponseWriter, r *http.Request, st queue.Staff) {
	a, err := s.q.Rematch(r.Context(), st)
	s.assigned(len(a))
	if err != nil {
		s.log.Warn().Err(err).Str("staff_id", st.ID.String()).Msg("matching after a change of an agent failed; the scan will retry")
	}
	// Re-read even when this call assigned nothing: a concurrent matcher
	// (the scan, another process) may have used the capacity.
	if now, err := s.q.Staff(r.Context(), st.ID); err == nil {
		st = now
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) assigned(n int) {
	if n > 0 && s.Assigned != nil {
		s.Assigned(n)
	}
}
