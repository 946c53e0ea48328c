package main

import (
	"fmt"
	"net/http"

	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
)

// compensationView is a task waiting for its missing speech.
type compensationView = view.Compensation

// listCompensations answers the compensating tasks, oldest first, with the
// segments that still lack audio and the last synthesis error.
func (s *server) listCompensations(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := view.CompensationsOf(r.Context(), s.pool, limit, projectOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out})
}

// requeueView is one task re-driven.
type requeueView struct {
	TaskID          uuid.UUID `json:"taskId"`
	Status          string    `json:"status"`
	MissingSegments []int     `json:"missingSegments"`
	Attempt         int       `json:"attempt"`
}

// requeueCompensations runs one tts_requeue pass (compensation.Requeue)
// over at most {"limit"} compensating tasks.
func (s *server) requeueCompensations(w http.ResponseWriter, r *http.Request) {
	body := struct {
		Limit int `json:"limit"`
	}{Limit: 100}
	if err := jsonbody.Decode(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.Limit < 1 || body.Limit > 1000 {
		s.fail(w, r, apierr.BadRequest(fmt.Sprintf("limit %d: want 1..1000", body.Limit)))
		return
	}
	tasks, err := compensation.Requeue(r.Context(), s.pool, s.pub, compensation.Options{Limit: body.Limit, Project: projectOf(r)})
	if err != nil && tasks == nil {
		s.fail(w, r, err)
		return
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("compensation requeued; publish deferred to the outbox sweep")
	}
	out := make([]requeueView, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, requeueView{TaskID: t.TaskID, Status: t.Status, MissingSegments: t.Missing, Attempt: t.Attempt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"requeued": out})
}
