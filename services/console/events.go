package main

import (
	"net/http"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/events"
	"github.com/google/uuid"
)

// The live events are the hub's (internal/events); these are the routes
// that stream them.

// taskEvents streams one task's events, starting with its current state,
// or, resuming after Last-Event-ID, with what changed since.
func (s *server) taskEvents(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Subscribed before the state is read: a change in between is sent
	// after it, never lost.
	sub := s.events.Subscribe(id, projectOf(r))
	defer s.events.Unsubscribe(sub)
	t, err := s.loadSummary(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	first := events.TaskEvent(view.TaskChange{TaskID: id, Status: t.Status, Error: t.Error, UpdatedAt: t.UpdatedAt, Project: t.Project})
	if err := s.events.Stream(w, r, sub, id, &first); err != nil {
		s.fail(w, r, err)
	}
}

// allEvents streams every task's events.
func (s *server) allEvents(w http.ResponseWriter, r *http.Request) {
	sub := s.events.Subscribe(uuid.Nil, projectOf(r))
	defer s.events.Unsubscribe(sub)
	if err := s.events.Stream(w, r, sub, uuid.Nil, nil); err != nil {
		s.fail(w, r, err)
	}
}
