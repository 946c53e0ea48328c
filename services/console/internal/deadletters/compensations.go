package deadletters

import (
	"fmt"
	"net/http"

	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
)

// listCompensations answers the compensating tasks, oldest first, with the
// segments that still lack audio and the last synthesis error.
func (s Room) listCompensations(w http.ResponseWriter, r *http.Request) {
	limit, err := route.Limit(r, 100, 1000)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	out, err := view.CompensationsOf(r.Context(), s.Pool, limit, route.ProjectOf(r))
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, map[string]any{"tasks": out})
}

// Requeued is one task re-driven (POST /api/compensations/requeue).
type Requeued struct {
	TaskID          uuid.UUID `json:"taskId"`
	Status          string    `json:"status"`
	MissingSegments []int     `json:"missingSegments"`
	Attempt         int       `json:"attempt"`
}

// requeueCompensations runs one tts_requeue pass (compensation.Requeue)
// over at most {"limit"} compensating tasks.
func (s Room) requeueCompensations(w http.ResponseWriter, r *http.Request) {
	body := struct {
		Limit int `json:"limit"`
	}{Limit: 100}
	if err := jsonbody.Decode(r, &body); err != nil {
		s.Fail(w, r, err)
		return
	}
	if body.Limit < 1 || body.Limit > 1000 {
		s.Fail(w, r, apierr.BadRequest(fmt.Sprintf("limit %d: want 1..1000", body.Limit)))
		return
	}
	tasks, err := compensation.Requeue(r.Context(), s.Pool, s.Pub, compensation.Options{Limit: body.Limit, Project: route.ProjectOf(r)})
	if err != nil && tasks == nil {
		s.Fail(w, r, err)
		return
	}
	if err != nil {
		s.Log.Warn().Err(err).Msg("compensation requeued; publish deferred to the outbox sweep")
	}
	out := make([]Requeued, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, Requeued{TaskID: t.TaskID, Status: t.Status, MissingSegments: t.Missing, Attempt: t.Attempt})
	}
	route.JSON(w, http.StatusOK, map[string]any{"requeued": out})
}
