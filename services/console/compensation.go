package main

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// compensationView is a task waiting for its missing speech.
type compensationView struct {
	TaskID          uuid.UUID `json:"taskId"`
	Status          string    `json:"status"`
	MissingSegments []int     `json:"missingSegments"`
	UpdatedAt       time.Time `json:"updatedAt"`
	LastError       string    `json:"lastError"`
}

// listCompensations answers the compensating tasks, oldest first, with the
// segments that still lack audio and the last synthesis error.
func (s *server) listCompensations(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.fail(w, r, badRequest(fmt.Sprintf("limit %q: want 1..1000", v)))
			return
		}
		limit = n
	}
	rows, err := s.pool.Query(r.Context(), `SELECT t.id, t.status, t.updated_at,
		ARRAY(SELECT s.idx FROM segments s WHERE s.task_id = t.id AND coalesce(s.tts_audio_key, '') = '' ORDER BY s.idx),
		coalesce((SELECT s.tts_error FROM segments s WHERE s.task_id = t.id AND s.tts_error <> ''
		          ORDER BY s.tts_failed_at DESC NULLS LAST LIMIT 1), t.error)
		FROM tasks t WHERE t.status = 'compensating' ORDER BY t.updated_at, t.id LIMIT $1`, limit)
	if err != nil {
		s.fail(w, r, fmt.Errorf("list compensations: %w", err))
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (compensationView, error) {
		var c compensationView
		var missing []int32
		err := row.Scan(&c.TaskID, &c.Status, &c.UpdatedAt, &missing, &c.LastError)
		c.MissingSegments = make([]int, 0, len(missing))
		for _, m := range missing {
			c.MissingSegments = append(c.MissingSegments, int(m))
		}
		return c, err
	})
	if err != nil {
		s.fail(w, r, fmt.Errorf("list compensations: %w", err))
		return
	}
	if out == nil {
		out = []compensationView{}
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
	if err := decodeJSON(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.Limit < 1 || body.Limit > 1000 {
		s.fail(w, r, badRequest(fmt.Sprintf("limit %d: want 1..1000", body.Limit)))
		return
	}
	tasks, err := compensation.Requeue(r.Context(), s.pool, s.pub, compensation.Options{Limit: body.Limit})
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
