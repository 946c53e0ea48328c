// Package auditlog is the console's audit: the operators' actions, logins
// and logouts recorded in console_audit (pkg/audit) as routes audited
// answer them, with what their handlers note, and the refused requests
// counted in memory and written a minute at a time.
package auditlog

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/services/console/internal/answer"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Log is the audit of one console: where it writes, who calls, and the
// refused requests counted.
type Log struct {
	Pool *pgxpool.Pool
	Log  zerolog.Logger
	// Who names the caller of a request and its role.
	Who func(r *http.Request) (name, role string)
	// Refused counts the refused requests until they are written.
	Refused *Refusals
}

// Record writes e, one row of console_audit (pkg/audit, which dubctl's
// database mode writes too: who did what to what, when, and how it
// ended). A failure is logged and does not fail the request it records:
// the action happened.
func (l Log) Record(ctx context.Context, e audit.Entry) {
	if err := audit.Record(ctx, l.Pool, e); err != nil {
		l.Log.Error().Err(err).Str("action", e.Action).Str("target", e.Target).Msg("audit record")
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

// Skip keeps the call out of the audit: it is audited otherwise (a
// refusal, counted).
func Skip(r *http.Request) { noteOf(r).skip = true }

// NoteActor names who acts when the route is public (login: the token
// given, "" when it is unknown).
func NoteActor(r *http.Request, name, role string) { n := noteOf(r); n.actor, n.role = name, role }

// NoteTarget names the entry's target when the path has none (a project
// created, a setting).
func NoteTarget(r *http.Request, target string) { noteOf(r).target = target }

// Note adds key to the entry's detail (a filter, a count).
func Note(r *http.Request, key string, v any) {
	n := noteOf(r)
	if n.detail == nil {
		n.detail = map[string]any{}
	}
	n.detail[key] = v
}

// Actions are the actions console_audit records; GET /api/audit filters
// by them (openapi.json lists them as the action parameter's enum, and a
// test keeps the two equal).
var Actions = []string{"login", "logout", "submit", "cancel", "retry", "redub", "review", "approve", "replay", "purge", "requeue",
	"pause", "resume", "config", "project", "token", "revoke", ActionRefused}

// Audited records every call of h as action in console_audit, with the
// caller's token name, the route's {id} or {step} as target (else the
// taskId answered: a task submitted), the time the
// request came and the answer's outcome.
// It panics when action is not one of Actions (a route's typo; the tests
// build every route).
func (l Log) Audited(action string, h http.HandlerFunc) http.HandlerFunc {
	if !slices.Contains(Actions, action) {
		panic("audited: action " + action + " is not in auditActions")
	}
	return func(w http.ResponseWriter, r *http.Request) {
		name, role := l.Who(r)
		n := &auditNote{actor: name, role: role, target: r.PathValue("id")}
		if n.target == "" {
			n.target = r.PathValue("step")
		}
		rec, at := &statusRecorder{answer.Recorder{ResponseWriter: w, Limit: 4096}}, time.Now()
		h(rec, r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, n)))
		if n.skip {
			return
		}
		if n.target == "" {
			n.target = rec.taskID()
		}
		l.Record(context.WithoutCancel(r.Context()), audit.Entry{At: at, Actor: n.actor, Role: n.role, Action: action,
			Target: n.target, Outcome: rec.outcome(), Status: rec.Status, Detail: n.detail})
	}
}

// statusRecorder keeps the status and the start of the body (the routes
// audited answer small JSON documents).
type statusRecorder struct{ answer.Recorder }

// taskID is the taskId of a successful answer (a task submitted), or "".
func (r *statusRecorder) taskID() string {
	var v struct {
		TaskID string `json:"taskId"`
	}
	if r.Status >= 400 || json.Unmarshal(r.Body.Bytes(), &v) != nil {
		return ""
	}
	return v.TaskID
}

// outcome is "ok", or "code: message" of the error answered.
func (r *statusRecorder) outcome() string {
	if r.Status < 400 {
		return "ok"
	}
	var e apierr.Error
	if json.Unmarshal(r.Body.Bytes(), &e) == nil && e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return strconv.Itoa(r.Status) + " " + http.StatusText(r.Status)
}

// List reads the entries f asks for, newest first (GET /api/audit); a
// cursor not of this list is a 400.
func (l Log) List(ctx context.Context, f audit.Filter) (audit.Page, error) {
	page, err := audit.List(ctx, l.Pool, f)
	if errors.Is(err, audit.ErrBadCursor) {
		return page, apierr.BadRequest(err.Error())
	}
	return page, err
}
