package events

import (
	"net/http"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
)

// Routes are the streams of the hub's events: every task's, and one
// task's; fail answers an error.
func (h *Hub) Routes(fail route.Fail) []route.Route {
	return []route.Route{
		{Method: "GET", Path: "/api/events", Access: route.Reader, Handle: h.allEvents(fail)},
		{Method: "GET", Path: "/api/tasks/{id}/events", Access: route.Reader, Handle: h.taskEvents(fail)},
	}
}

// taskEvents streams one task's events, starting with its current state,
// or, resuming after Last-Event-ID, with what changed since.
func (h *Hub) taskEvents(fail route.Fail) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := route.TaskID(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		// Subscribed before the state is read: a change in between is sent
		// after it, never lost.
		sub := h.Subscribe(id, route.ProjectOf(r))
		defer h.Unsubscribe(sub)
		t, err := view.LoadSummary(r.Context(), h.pool, id)
		if err != nil {
			fail(w, r, err)
			return
		}
		first := TaskEvent(view.TaskChange{TaskID: id, Status: t.Status, Error: t.Error, UpdatedAt: t.UpdatedAt, Project: t.Project})
		if err := h.Stream(w, r, sub, id, &first); err != nil {
			fail(w, r, err)
		}
	}
}

// allEvents streams every task's events.
func (h *Hub) allEvents(fail route.Fail) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sub := h.Subscribe(uuid.Nil, route.ProjectOf(r))
		defer h.Unsubscribe(sub)
		if err := h.Stream(w, r, sub, uuid.Nil, nil); err != nil {
			fail(w, r, err)
		}
	}
}
