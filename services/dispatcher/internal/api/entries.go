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
		writeError(w, http.StatusBadRequest, CodeValidation, fmt.Sprintf("unknown event_type %s (want %q)", quoted(req.EventType), EventManualServiceRequest))
		return
	}
	er, err := req.Payload.Admit(req.ProjectID, req.VisitorID, queue.SourceAIRequest)
	if err != nil {
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
	id, ok := pathID(w, r)
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
