package task

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The statuses of a task (tasks.status).
const (
	Queued       = "queued"
	Running      = "running"
	Compensating = "compensating"
	// Review is a task waiting for a person's edits of its lines before
	// the voice is made (Hold; Approve moves it on): never stuck, never
	// alerted, since nothing runs and nothing is owed.
	Review = "review"
	Done   = "done"
	Failed = "failed"
	// Cancelled is the end of a task an operator cancelled (Cancel), or
	// of a parent whose children ended cancelled, none of them failed.
	Cancelled = "cancelled"
)

// Statuses lists every status of a task, in the order of its lifecycle.
var Statuses = []string{Queued, Running, Compensating, Review, Done, Failed, Cancelled}

// Ended reports whether status is one a task ends in (done, failed,
// cancelled): nothing moves it on but an operator (Retry, Redub).
func Ended(status string) bool {
	return status == Done || status == Failed || status == Cancelled
}

// Transition is one change of one task's row: a single SQL statement that
// checks the status it leaves, writes the row and adds Event to the outbox
// when the status changes. Build it with Create, Start, Succeed, Fail, ...;
// run it with Apply, or stage SQL and Args in a batch and read its row with
// Scan.
type Transition struct {
	// Name names the transition in errors and logs ("succeed").
	Name string
	// TaskID is the task it changes.
	TaskID uuid.UUID
	// SQL is the statement. It returns one row: the status before (NULL:
	// no such task), the status after (NULL: the row was not written) and
	// the event's outbox row (NULL: no event was added).
	SQL string
	// Args are the statement's arguments.
	Args []any
	// Event is the event.* message the transition announces, nil for
	// changes that announce nothing (Touch, Settle). Its ID is set by Scan
	// when the statement added it to the outbox.
	Event *outbox.Message
}

// Result says what a transition did.
type Result struct {
	// From is the status before; "" when Create made the row.
	From string
	// To is the status after (From when the row was kept).
	To string
	// Changed reports whether the row was written.
	Changed bool
	// EventID is the outbox row of the event added, 0 when none was:
	// publish it after the commit (outbox.Flush) or leave it to a sweep.
	EventID int64
}

// Querier runs a statement that returns one row: a transaction, a
// connection or a pool (a single statement is atomic on its own).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Apply runs t on q. A refused transition returns a *RefusedError (and, on
// a transaction, leaves it failed: roll it back); a missing task returns
// ErrNotFound.
func Apply(ctx context.Context, q Querier, t Transition) (Result, error) {
	return t.Scan(q.QueryRow(ctx, t.SQL, t.Args...))
}

// Scan reads the row of t's statement, for callers that ran it themselves
// (in a batch). It sets t.Event.ID when the event was added.
func (t Transition) Scan(row pgx.Row) (Result, error) {
	var from, to *string
	var event *int64
	if err := row.Scan(&from, &to, &event); err != nil {
		if refused := MapError(err); refused != err {
			return Result{}, refused
		}
		return Result{}, fmt.Errorf("%s task %s: %w", t.Name, t.TaskID, err)
	}
	var r Result
	if from != nil {
		r.From = *from
	}
	r.To, r.Changed = r.From, to != nil
	if to != nil {
		r.To = *to
	}
	if from == nil && to == nil {
		return r, fmt.Errorf("%s task %s: %w", t.Name, t.TaskID, ErrNotFound)
	}
	if event != nil {
		r.EventID = *event
		if t.Event != nil {
			t.Event.ID = *event
		}
	}
	return r, nil
}

// ErrNotFound is returned for a transition of a task that does not exist.
var ErrNotFound = errors.New("no such task")

// ErrRefused matches every *RefusedError.
var ErrRefused = errors.New("task transition refused")

// RefusedError reports a transition that the task's status does not allow;
// nothing of it was applied.
type RefusedError struct {
	TaskID     uuid.UUID
	Transition string
	// From is the status the task was in.
	From string
	err  error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("task %s is %s: %s refused", e.TaskID, e.From, e.Transition)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Unwrap returns the Postgres error.
func (e *RefusedError) Unwrap() error { return e.err }

// refusedDetail reads the row a refused transition tried to write, as
// Postgres reports it: "Failing row contains (<id>, refused: <name> from
// <status>, ...)".
var refusedDetail = regexp.MustCompile(`^Failing row contains \(([0-9a-f-]{36}), refused: ([a-z_]+) from ([a-z_]+),`)

// MapError turns the Postgres error of a refused transition — raised by the
// statement, and so by the batch or transaction that ran it — into a
// *RefusedError; other errors are returned as they are.
func MapError(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "23514" || pg.ConstraintName != "tasks_status_check" {
		return err
	}
	m := refusedDetail.FindStringSubmatch(pg.Detail)
	if m == nil {
		return err
	}
	id, _ := uuid.Parse(m[1])
	return &RefusedError{TaskID: id, Transition: m[2], From: m[3], err: err}
}
