package main

import (
	"net/http"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// timeline is what GET /api/tasks/{id}/timeline answers.
type timeline struct {
	TaskID uuid.UUID    `json:"taskId"`
	Events []view.Event `json:"events"`
}

// taskTimeline answers every event of a task in order (view.Timeline).
func (s *server) taskTimeline(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	evs, err := view.Timeline(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, timeline{TaskID: id, Events: evs})
}
