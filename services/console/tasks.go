package main

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
)

// errTaskNotFound is returned for a task id without a row.
var errTaskNotFound = view.ErrNotFound

// Paging bounds of GET /api/tasks.
const (
	defaultPage = 50
	maxPage     = view.MaxPage
)

// taskPage is what GET /api/tasks answers.
type taskPage = view.Page

// listTasks answers the tasks newest first, one page at a time
// (view.List): ?status=&limit=&cursor=&includeChildren=, and the search
// ?q= (id prefix or file name) &language= &since= &until= &error=.
func (s *server) listTasks(w http.ResponseWriter, r *http.Request) {
	f, err := taskFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := view.List(r.Context(), s.pool, f)
	if errors.Is(err, view.ErrBadFilter) {
		err = apierr.BadRequest(err.Error())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// taskFilter reads the list's query parameters.
func taskFilter(r *http.Request) (view.Filter, error) {
	q := r.URL.Query()
	f := view.Filter{Status: q.Get("status"), Cursor: q.Get("cursor")}
	var err error
	if f.Limit, err = queryLimit(r, defaultPage, maxPage); err != nil {
		return f, err
	}
	f.Q, f.Language, f.Error = strings.TrimSpace(q.Get("q")), q.Get("language"), q.Get("error")
	// ?project= narrows an admin's list to one project (the page's
	// switcher); a project's token lists its own project, whatever it asks.
	if f.Project = q.Get("project"); projectOf(r) != "" {
		f.Project = projectOf(r)
	}
	if f.Since, f.Until, err = timeRange(q.Get("since"), q.Get("until")); err != nil {
		return f, err
	}
	switch v := q.Get("includeChildren"); v {
	case "", "false":
	case "true":
		f.WithChildren = true
	default:
		return f, apierr.BadRequest(fmt.Sprintf("includeChildren %q: want true or false", apierr.Short(v)))
	}
	return f, nil
}

// queryLimit reads the ?limit= parameter: def when absent, else 1..most.
func queryLimit(r *http.Request, def, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, apierr.BadRequest(fmt.Sprintf("limit %q: want 1..%d", apierr.Short(v), most))
	}
	return n, nil
}

// taskID reads the {id} path value.
func taskID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, apierr.BadRequest(fmt.Sprintf("task id %q: want a UUID", apierr.Short(r.PathValue("id"))))
	}
	return id, nil
}

// taskIDAndBody reads the {id} path value and the JSON body into v.
func taskIDAndBody(r *http.Request, v any) (uuid.UUID, error) {
	id, err := taskID(r)
	if err != nil {
		return uuid.Nil, err
	}
	return id, jsonbody.Decode(r, v)
}
