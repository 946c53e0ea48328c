package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Claim outcomes returned by ClaimStep.
const (
	Claimed  = "claimed"  // the caller holds the attempt's lease
	Done     = "done"     // the part already succeeded
	Waiting  = "waiting"  // the predecessor step has not succeeded yet
	Held     = "held"     // another live worker holds this attempt
	Finished = "finished" // this attempt already failed or was parked
)

// Step attempt statuses.
const (
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusParked    = "parked"
)

// ErrLeaseLost is returned when a worker tries to finish an attempt it no
// longer holds (its lease ran out and another worker took the attempt over).
var ErrLeaseLost = errors.New("step lease lost")

// ErrClaimLost is returned when the attempt's claim row is gone (a claim
// committed without waiting for the WAL flush is lost when Postgres
// crashes). Nobody else holds the attempt: the message must be retried, never
// acked.
var ErrClaimLost = errors.New("step claim lost")

// Claim is the result of ClaimStep.
type Claim struct {
	Outcome     string
	StepID      int64
	BaseAttempt int
	HeldUntil   time.Time
}

// StepKey names one attempt of one part of one step of a task.
type StepKey struct {
	TaskID  uuid.UUID
	Step    string
	Part    string
	Attempt int
}

// Querier is what the store's statements run on: a pool, a connection or a
// transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ClaimStep claims the attempt k for worker with a lease, in one
// compare-and-swap statement (see claim_step in the migrations). after names
// the step that must have succeeded first ("" for none).
// message is the envelope, kept with the attempt for re-drives.
func ClaimStep(ctx context.Context, q Querier, k StepKey, worker string, lease time.Duration, after string, message []byte) (Claim, error) {
	var c Claim
	err := scanClaim(q.QueryRow(ctx, claimStepSQL, k.TaskID, k.Step, k.Part, k.Attempt, worker, lease, after, message), k, &c)
	return c, err
}

// claimStepSQL calls claim_step (arguments: task, step, part, attempt,
// worker, lease, after, message).
const claimStepSQL = `SELECT c.outcome, c.step_id, c.base_attempt, c.held_until
		FROM claim_step($1, $2, $3, $4, $5, $6, $7, $8) c`

// QueueClaimStep queues ClaimStep's statement on b, so that the claims of
// several deliveries go to Postgres in one round trip; the claim is read
// into c when the batch is closed, and its error is returned from the
// batch's Close, as ClaimStep would return it. Claims queued on one batch
// share its transaction: one that fails undoes them all.
func QueueClaimStep(b *pgx.Batch, k StepKey, worker string, lease time.Duration, after string, message []byte, c *Claim) {
	b.Queue(claimStepSQL, k.TaskID, k.Step, k.Part, k.Attempt, worker, lease, after, message).QueryRow(func(row pgx.Row) error {
		return scanClaim(row, k, c)
	})
}

// scanClaim reads claim_step's row into c.
func scanClaim(row pgx.Row, k StepKey, c *Claim) error {
	var id *int64
	var base *int32
	var held *time.Time
	*c = Claim{}
	if err := row.Scan(&c.Outcome, &id, &base, &held); err != nil {
		return fmt.Errorf("claim %s/%s part %q attempt %d: %w", k.TaskID, k.Step, k.Part, k.Attempt, err)
	}
	if id != nil {
		c.StepID = *id
	}
	if base != nil {
		c.BaseAttempt = int(*base)
	}
	if held != nil {
		c.HeldUntil = *held
	}
	return nil
}

// ExtendLease pushes the lease of a claimed attempt forward; it returns
// ErrLeaseLost when another worker holds it or it has ended, ErrClaimLost
// when its row is gone.
func ExtendLease(ctx context.Context, q Querier, stepID int64, worker string, lease time.Duration) error {
	var extended bool
	err := q.QueryRow(ctx, `WITH u AS (UPDATE task_steps SET lease_until = now() + $3
			WHERE id = $1 AND worker = $2 AND status = 'running' RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM u) FROM task_steps WHERE id = $1`, stepID, worker, lease).Scan(&extended)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: step %d has no row", ErrClaimLost, stepID)
	case err != nil:
		return fmt.Errorf("extend lease of step %d: %w", stepID, err)
	case !extended:
		return ErrLeaseLost
	}
	return nil
}

// ReleaseLease ends the lease of a claimed attempt at once, so that the
// next delivery of the message takes it over without waiting (used when a
// worker hands work back on shutdown).
func ReleaseLease(ctx context.Context, q Querier, stepID int64, worker string) error {
	_, err := q.Exec(ctx, `UPDATE task_steps SET lease_until = now() - interval '1 millisecond'
		WHERE id = $1 AND worker = $2 AND status = 'running'`, stepID, worker)
	if err != nil {
		return fmt.Errorf("release lease of step %d: %w", stepID, err)
	}
	return nil
}

// FinishStepSQL ends a claimed attempt (arguments: step id, worker, status,
// error); it raises DF001 — ErrLeaseLost through MapError — when the worker no
// longer holds the attempt, DF002 — ErrClaimLost — when its row is gone.
const FinishStepSQL = `SELECT finish_step($1, $2, $3, $4)`

// AddPartSQL records that a step has a part and the message emitted for it
// (arguments: task id, step, part, message body), so that a part whose
// message is lost before it ran can be re-driven from what was sent.
const AddPartSQL = `INSERT INTO step_parts (task_id, step, part, message) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`

// EmitWhenDoneSQL is the fan-in (arguments: task id, step, next step, next
// part, message id, exchange, routing key, body): it returns the outbox id,
// or NULL when the step is not complete yet or the next part was already
// emitted.
const EmitWhenDoneSQL = `SELECT emit_when_done($1, $2, $3, $4, $5, $6, $7, $8)`

// MapError turns the store's own Postgres errors into sentinel errors:
// DF001 into ErrLeaseLost, DF002 into ErrClaimLost, a second success of one
// part into ErrDuplicate.
func MapError(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "DF001":
			return fmt.Errorf("%w: %s", ErrLeaseLost, pg.Message)
		case pg.Code == "DF002":
			return fmt.Errorf("%w: %s", ErrClaimLost, pg.Message)
		case pg.Code == "23505" && pg.ConstraintName == "task_steps_one_success":
			return fmt.Errorf("%w: %s", ErrDuplicate, pg.Message)
		}
	}
	return err
}

// ErrDuplicate is returned when a part that already succeeded would
// succeed a second time; the second run's effects are rolled back.
var ErrDuplicate = errors.New("step part already succeeded")
