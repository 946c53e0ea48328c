package database

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Database mode writes the audit row the console writes for the same
// action (pkg/audit; the console's audited routes): the same action names
// and targets (a task id, a dead letter id, a step), the same outcome
// ("ok", or the error's code and message) and HTTP status the console
// answers for that outcome, the same detail. The actor is who runs dubctl
// (--as, else the operating-system user) in the role "database". The
// operator events of a task's timeline (cancel, retry, redub, submit) are
// derived from these rows, so they show either door's actions.

// action is one audit row to write once the action ran.
type action struct {
	name, target string
	// okStatus is what the console answers on success (201 for a submit).
	okStatus int
	detail   map[string]any
}

// actionOf is an action without detail.
func actionOf(name, target string, okStatus int) action {
	return action{name: name, target: target, okStatus: okStatus}
}

// record writes a's audit row with err's outcome. A failure to write it is
// a warning: the action happened (or was refused) all the same.
func (d *Backend) record(ctx context.Context, a action, err error) {
	pool, perr := d.db(ctx)
	if perr != nil {
		return
	}
	status, outcome := d.outcomeOf(err, a.okStatus)
	e := audit.Entry{Actor: d.actor, Role: audit.RoleDatabase, Action: a.name, Target: a.target, Outcome: outcome,
		Status: status, Detail: a.detail}
	if werr := audit.Record(context.WithoutCancel(ctx), pool, e); werr != nil {
		fmt.Fprintf(d.warn, "dubctl: warning: %v\n", werr)
	}
}

// outcomeOf is the HTTP status and outcome the console records for err:
// "ok" with okStatus, or "code: message" as the console answers it (an
// error it does not know is "internal: internal error").
func (d *Backend) outcomeOf(err error, okStatus int) (int, string) {
	if err == nil {
		return okStatus, "ok"
	}
	status, code := d.statusOf(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	return status, code + ": " + msg
}

// statusOf maps an error of the shared packages (and the known errors of
// those main calls itself) to the console's status and code for it.
func (d *Backend) statusOf(err error) (int, string) {
	if e, ok := admit.As(err); ok {
		switch e.Kind {
		case admit.TooLarge:
			return http.StatusRequestEntityTooLarge, "too_large"
		case admit.Unavailable:
			return http.StatusServiceUnavailable, "unavailable"
		}
		return http.StatusBadRequest, "bad_request"
	}
	var ee *cli.ExitError
	switch {
	case errors.As(err, &ee) && ee.Code == cli.ExitUsage, anyIs(err, dub.ErrNoSegment, dub.ErrInvalidText,
		dub.ErrInvalidLine, dlq.ErrBadFilter, view.ErrBadFilter, audit.ErrBadCursor):
		return http.StatusBadRequest, "bad_request"
	case anyIs(err, task.ErrNotFound, view.ErrNotFound, dlq.ErrNotFound, dub.ErrNotFound, setting.ErrUnknown),
		anyIs(err, d.known.NotFound...):
		return http.StatusNotFound, "not_found"
	case anyIs(err, task.ErrRefused, dlq.ErrReplayed, dlq.ErrTaskDone, dlq.ErrNotReplayable,
		dub.ErrParent, dub.ErrNotInReview, dub.ErrNoLines, tenant.ErrExists), anyIs(err, d.known.Conflict...):
		return http.StatusConflict, "conflict"
	case errors.Is(err, tenant.ErrNotFound):
		return http.StatusNotFound, "not_found"
	}
	return http.StatusInternalServerError, "internal"
}

// anyIs reports whether err is one of targets.
func anyIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// Known are errors of the packages main calls itself (pkg/retry,
// pkg/worker: deeper in the import graph than a room may stand) that the
// console answers as not found or as a conflict.
type Known struct {
	NotFound, Conflict []error
}

// Act runs fn, an action of main's (its package stands too deep in the
// import graph for a room), on the pool as who acts, and writes the
// action's audit row (name, target) with its outcome.
func (d *Backend) Act(ctx context.Context, name, target string, fn func(pool *pgxpool.Pool, actor string) error) error {
	pool, err := d.db(ctx)
	if err != nil {
		return err
	}
	err = fn(pool, d.actor)
	d.record(ctx, actionOf(name, target, http.StatusOK), err)
	return err
}

// Transact is Act in one transaction: fn returns the outbox rows it added,
// published after the commit. A refusal of pkg/admit is a usage
// error, as the console's 400 is.
func (d *Backend) Transact(ctx context.Context, name, target string, fn func(tx pgx.Tx) ([]int64, error)) error {
	if _, err := d.db(ctx); err != nil {
		return err
	}
	if _, err := d.publisher(ctx); err != nil {
		return err
	}
	err := d.commit(ctx, fn)
	var refusal *admit.Error
	if errors.As(err, &refusal) {
		err = cli.UsageError(refusal)
	}
	d.record(ctx, actionOf(name, target, http.StatusOK), err)
	return err
}
