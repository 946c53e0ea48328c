package system

import (
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/engines"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// listAudit answers GET /api/audit.
func (s Room) listAudit(w http.ResponseWriter, r *http.Request) {
	f, err := readAuditFilter(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	page, err := s.Audit.List(r.Context(), f)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, page)
}

func readAuditFilter(r *http.Request) (audit.Filter, error) {
	q := r.URL.Query()
	f := audit.Filter{Action: q.Get("action"), Actor: q.Get("actor"), Target: q.Get("target"), Cursor: q.Get("cursor")}
	var err error
	if f.Since, f.Until, err = route.TimeRange(q.Get("since"), q.Get("until"), dlq.ParseSince); err != nil {
		return f, err
	}
	if f.Limit, err = route.Limit(r, route.DefaultPage, view.MaxPage); err != nil {
		return f, err
	}
	return f, nil
}

// listEngines answers GET /api/engines?step= (engines.List).
func (s Room) listEngines(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	list, err := engines.List(r.Context(), s.Pool, r.URL.Query().Get("step"), now)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, map[string]any{"engines": list, "checkedAt": now.UTC()})
}
