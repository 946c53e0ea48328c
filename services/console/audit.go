package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// auditEntry is one row of console_audit (pkg/audit, which dubctl's
// database mode writes too): who (the token's name and role) did what
// (action) to what (target), when, and how it ended.
type auditEntry = audit.Entry

// recordAudit writes e to console_audit (audit.Record). A failure is
// logged and does not fail the request it records: the action happened.
func (s *server) recordAudit(ctx context.Context, e auditEntry) {
	if err := audit.Record(ctx, s.pool, e); err != nil {
		s.log.Error().Err(err).Str("action", e.Action).Str("target", e.Target).Msg("audit record")
	}
}

// auditNote is what a handler run by audited may add to its entry.
type auditNote struct {
	actor, role, target string
	detail              map[string]any
	// skip: the call is audited otherwise (a refusal, counted).
	skip bool
}

type auditNoteKey struct{}

func noteOf(r *http.Request) *auditNote {
	n, _ := r.Context().Value(auditNoteKey{}).(*auditNote)
	if n == nil {
		return &auditNote{} // not audited: notes go nowhere
	}
	return n
}

// noteActor names who acts when the route is public (login: the token
// given, "" when it is unknown).
func noteActor(r *http.Request, name, role string) { n := noteOf(r); n.actor, n.role = name, role }

// noteAuditTarget names the entry's target when the path has none (a
// project created).
func noteAuditTarget(r *http.Request, target string) { noteOf(r).target = target }

// noteAudit adds key to the entry's detail (a filter, a count).
func noteAudit(r *http.Request, key string, v any) {
	n := noteOf(r)
	if n.detail == nil {
		n.detail = map[string]any{}
	}
	n.detail[key] = v
}

// auditActions are the actions console_audit records; GET /api/audit
// filters by them (openapi.json lists them as the action parameter's enum,
// and a test keeps the two equal).
var auditActions = []string{"login", "logout", "submit", "cancel", "retry", "redub", "review", "approve", "replay", "purge", "requeue",
	"pause", "resume", "config", "project", "token", "revoke", actionRefused}

// audited records every call of h as action in console_audit, with the
// caller's token name, the route's {id} or {step} as target (else the
// taskId answered: a task submitted), the time the
// request came and the answer's outcome.
func (s *server) audited(action string, h http.HandlerFunc) http.HandlerFunc {
	if !slices.Contains(auditActions, action) {
		panic("audited: action " + action + " is not in auditActions") // a route's typo; the tests build every route
	}
	return func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		n := &auditNote{actor: p.name, role: p.role, target: r.PathValue("id")}
		if n.target == "" {
			n.target = r.PathValue("step")
		}
		rec, at := &statusRecorder{ResponseWriter: w}, time.Now()
		h(rec, r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, n)))
		if n.skip {
			return
		}
		if n.target == "" {
			n.target = rec.taskID()
		}
		s.recordAudit(context.WithoutCancel(r.Context()), auditEntry{At: at, Actor: n.actor, Role: n.role, Action: action,
			Target: n.target, Outcome: rec.outcome(), Status: rec.status, Detail: n.detail})
	}
}

// statusRecorder keeps the status and the start of the body (the routes
// audited answer small JSON documents).
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len() < 4096 {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// taskID is the taskId of a successful answer (a task submitted), or "".
func (r *statusRecorder) taskID() string {
	var v struct {
		TaskID string `json:"taskId"`
	}
	if r.status >= 400 || json.Unmarshal(r.body.Bytes(), &v) != nil {
		return ""
	}
	return v.TaskID
}

// outcome is "ok", or "code: message" of the error answered.
func (r *statusRecorder) outcome() string {
	if r.status < 400 {
		return "ok"
	}
	var e apiError
	if json.Unmarshal(r.body.Bytes(), &e) == nil && e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return strconv.Itoa(r.status) + " " + http.StatusText(r.status)
}

// auditPage is what GET /api/audit answers, newest first.
type auditPage = audit.Page

// listAudit answers GET /api/audit.
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) {
	f, err := readAuditFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.readAudit(r.Context(), f)
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

func (s *server) readAudit(ctx context.Context, f audit.Filter) (auditPage, error) {
	page, err := audit.List(ctx, s.pool, f)
	if errors.Is(err, audit.ErrBadCursor) {
		return page, apierr.BadRequest(err.Error())
	}
	return page, err
}
