package main

import (
	"context"
	"net/http"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// The task's read endpoints answer the read model (pkg/view), which dubctl
// prints too: one set of shapes, loaded in one place.

// taskSummary is a task without its steps.
type taskSummary = view.Summary

// taskDetail is GET /api/tasks/{id}.
type taskDetail = view.Task

// loadDetail reads the task's detail (view.Load).
func (s *server) loadDetail(ctx context.Context, r *http.Request) (*taskDetail, error) {
	id, err := taskID(r)
	if err != nil {
		return nil, err
	}
	return view.Load(ctx, s.pool, id)
}

// requestedDetail loads the detail of the task named by the {id} path
// value; it answers the error itself and returns false on failure.
func (s *server) requestedDetail(w http.ResponseWriter, r *http.Request) (*taskDetail, bool) {
	d, err := s.loadDetail(r.Context(), r)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return d, true
}

// getTask answers the task's detail with presigned links and its timing
// report.
func (s *server) getTask(w http.ResponseWriter, r *http.Request) {
	d, ok := s.requestedDetail(w, r)
	if !ok {
		return
	}
	s.linksOf(r.Context(), d)
	view.ReadTimingReport(r.Context(), s.objects, d)
	writeJSON(w, http.StatusOK, d)
}

// loadSummary reads one task's summary.
func (s *server) loadSummary(ctx context.Context, q task.Querier, id uuid.UUID) (taskSummary, error) {
	return view.LoadSummary(ctx, q, id)
}
