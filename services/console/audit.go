package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
)

// The audit is the auditlog room's (internal/auditlog); the server's audit
// and the route that reads it are here.

// auditLog is the server's audit.
func (s *server) auditLog() auditlog.Log {
	return auditlog.Log{Pool: s.pool, Log: s.log, Refused: &s.refused,
		Who: func(r *http.Request) (string, string) { p := principalOf(r); return p.Name, p.Role }}
}

// audited records every call of h as action (auditlog.Log.Audited).
func (s *server) audited(action string, h http.HandlerFunc) http.HandlerFunc {
	return s.auditLog().Audited(action, h)
}

// listAudit answers GET /api/audit.
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) {
	f, err := readAuditFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.auditLog().List(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func readAuditFilter(r *http.Request) (audit.Filter, error) {
	q := r.URL.Query()
	f := audit.Filter{Action: q.Get("action"), Actor: q.Get("actor"), Target: q.Get("target"), Cursor: q.Get("cursor")}
	var err error
	if f.Since, f.Until, err = timeRange(q.Get("since"), q.Get("until")); err != nil {
		return f, err
	}
	if f.Limit, err = queryLimit(r, defaultPage, maxPage); err != nil {
		return f, err
	}
	return f, nil
}

// timeRange reads since and until (dlq.ParseSince's forms: an RFC 3339
// time, a date, or a duration back from now); nil when not given.
func timeRange(since, until string) (*time.Time, *time.Time, error) {
	now := time.Now()
	var out [2]*time.Time
	for i, v := range []string{since, until} {
		if v == "" {
			continue
		}
		t, err := dlq.ParseSince(v, now)
		if err != nil {
			return nil, nil, apierr.BadRequest(strings.Replace(err.Error(), "since", []string{"since", "until"}[i], 1))
		}
		out[i] = &t
	}
	return out[0], out[1], nil
}
