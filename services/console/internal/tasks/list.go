package tasks

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// listTasks answers the tasks newest first, one page at a time
// (view.List): ?status=&limit=&cursor=&includeChildren=, and the search
// ?q= (id prefix or file name) &language= &since= &until= &error=.
func (s Room) listTasks(w http.ResponseWriter, r *http.Request) {
	f, err := taskFilter(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	page, err := view.List(r.Context(), s.Pool, f)
	if errors.Is(err, view.ErrBadFilter) {
		err = apierr.BadRequest(err.Error())
	}
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, page)
}

// taskFilter reads the list's query parameters.
func taskFilter(r *http.Request) (view.Filter, error) {
	q := r.URL.Query()
	f := view.Filter{Status: q.Get("status"), Cursor: q.Get("cursor")}
	var err error
	if f.Limit, err = route.Limit(r, route.DefaultPage, view.MaxPage); err != nil {
		return f, err
	}
	f.Q, f.Language, f.Error = strings.TrimSpace(q.Get("q")), q.Get("language"), q.Get("error")
	// ?project= narrows an admin's list to one project (the page's
	// switcher); a project's token lists its own project, whatever it asks.
	if f.Project = q.Get("project"); route.ProjectOf(r) != "" {
		f.Project = route.ProjectOf(r)
	}
	if f.Since, f.Until, err = route.TimeRange(q.Get("since"), q.Get("until"), dlq.ParseSince); err != nil {
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
