package attempt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/outboxrow"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Statement is one transition as a value: SQL and its arguments, run alone
// (Exec) or staged with a step's other statements in one transaction.
type Statement struct {
	// Name names the transition in errors.
	Name string
	SQL  string
	Args []any
}

// Exec runs s on q; the owner's errors come back as its sentinels
// (MapError).
func (s Statement) Exec(ctx context.Context, q store.Querier) error {
	if _, err := q.Exec(ctx, s.SQL, s.Args...); err != nil {
		return fmt.Errorf("%s: %w", s.Name, MapError(err))
	}
	return nil
}

// Claim claims the attempt k for worker with a lease, in one
// compare-and-swap statement (see claim_step in the migrations). after names
// the step that must have succeeded first ("" for none).
// message is the envelope, kept with the attempt for re-drives. It
// records no queue wait (QueueClaim does, given when the message was
// ready).
func Claim(ctx context.Context, q store.Querier, k Key, worker string, lease time.Duration, after string, message []byte) (Lease, error) {
	var l Lease
	err := scanClaim(q.QueryRow(ctx, claimSQL, k.TaskID, k.Step, k.Part, k.Attempt, worker, lease, after, message, nil), k, &l)
	return l, err
}

// claimSQL calls claim_step_waited (arguments: task, step, part, attempt,
// worker, lease, after, message, ready).
const claimSQL = `SELECT c.outcome, c.step_id, c.base_attempt, c.held_until, c.queue_wait, c.project
		FROM claim_step_waited($1, $2, $3, $4, $5, $6, $7, $8, $9) c`

// QueueClaim queues Claim's statement on b, so that the claims of
// several deliveries go to Postgres in one round trip; the claim is read
// into l when the batch is closed, and its error is returned from the
// batch's Close, as Claim would return it. Claims queued on one batch
// share its transaction: one that fails undoes them all. ready is when
// the message was ready in its queue (zero: not known); the claim that
// creates the attempt records its queue wait (claim_step_waited).
func QueueClaim(b *pgx.Batch, k Key, worker string, lease time.Duration, after string, message []byte, ready time.Time, l *Lease) {
	b.Queue(claimSQL, k.TaskID, k.Step, k.Part, k.Attempt, worker, lease, after, message, readyArg(ready)).QueryRow(func(row pgx.Row) error {
		return scanClaim(row, k, l)
	})
}

// readyArg is a claim's ready argument: NULL for the zero time.
func readyArg(ready time.Time) *time.Time {
	if ready.IsZero() {
		return nil
	}
	return &ready
}

// scanClaim reads claim_step's row into l.
func scanClaim(row pgx.Row, k Key, l *Lease) error {
	var id *int64
	var base *int32
	var held *time.Time
	*l = Lease{}
	if err := row.Scan(&l.Outcome, &id, &base, &held, &l.QueueWait, &l.Project); err != nil {
		return fmt.Errorf("claim %s/%s part %q attempt %d: %w", k.TaskID, k.Step, k.Part, k.Attempt, err)
	}
	if id != nil {
		l.StepID = *id
	}
	if base != nil {
		l.BaseAttempt = int(*base)
	}
	if held != nil {
		l.HeldUntil = *held
	}
	return nil
}

// Extend pushes the lease of a claimed attempt forward; it returns
// ErrLeaseLost when another worker holds it or it has ended, ErrClaimLost
// when its row is gone, and a *StoppedError (ErrTaskStopped) when
// the lease was pushed but the attempt's task stopped meanwhile: the
// heartbeat's way to learn it when the status notification was missed.
func Extend(ctx context.Context, q store.Querier, stepID int64, worker string, lease time.Duration) error {
	var extended bool
	var stopped *string
	err := q.QueryRow(ctx, `WITH u AS (UPDATE task_steps SET lease_until = now() + $3
			WHERE id = $1 AND worker = $2 AND status = 'running' RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM u), task_stopped(task_id) FROM task_steps WHERE id = $1`,
		stepID, worker, lease).Scan(&extended, &stopped)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: step %d has no row", ErrClaimLost, stepID)
	case err != nil:
		return fmt.Errorf("extend lease of step %d: %w", stepID, err)
	case !extended:
		return ErrLeaseLost
	case stopped != nil:
		return &StoppedError{Status: *stopped}
	}
	return nil
}

// Holder reads who holds the attempt stepID of k and its status: for a
// worker whose commit's outcome is unknown (the database went away under
// it), the row says whether the commit was applied — the attempt ended —
// or not — still running, held by the worker. It returns ErrClaimLost when
// the row is gone (the claim itself was lost with an asynchronous
// primary); the key is checked with the id, as a promoted standby may give
// a lost row's id to another.
func Holder(ctx context.Context, q store.Querier, stepID int64, k Key) (worker, status string, err error) {
	err = q.QueryRow(ctx, `SELECT worker, status FROM task_steps
		WHERE id = $1 AND task_id = $2 AND step = $3 AND part = $4 AND attempt = $5`,
		stepID, k.TaskID, k.Step, k.Part, k.Attempt).Scan(&worker, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("%w: step %d has no row", ErrClaimLost, stepID)
	}
	if err != nil {
		return "", "", fmt.Errorf("read holder of step %d: %w", stepID, err)
	}
	return worker, status, nil
}

// Release ends the lease of a claimed attempt at once, so that the
// next delivery of the message takes it over without waiting (used when a
// worker hands work back).
func Release(ctx context.Context, q store.Querier, stepID int64, worker string) error {
	_, err := q.Exec(ctx, `UPDATE task_steps SET lease_until = now() - interval '1 millisecond'
		WHERE id = $1 AND worker = $2 AND status = 'running'`, stepID, worker)
	if err != nil {
		return fmt.Errorf("release lease of step %d: %w", stepID, err)
	}
	return nil
}

// Finish ends the claimed attempt stepID of worker with outcome o and
// reason (the error recorded; "" for none). Its statement raises DF001 —
// ErrLeaseLost through MapError — when the worker no longer holds the
// attempt, DF002 — ErrClaimLost — when its row is gone.
func Finish(stepID int64, worker string, o Outcome, reason string) Statement {
	return Statement{Name: "finish attempt as " + string(o), SQL: `SELECT finish_step($1, $2, $3, $4)`,
		Args: []any{stepID, worker, o.Status(), reason}}
}

// Succeed is Finish with Succeeded.
func Succeed(stepID int64, worker string) Statement { return Finish(stepID, worker, Succeeded, "") }

// Park is Finish with Parked.
func Park(stepID int64, worker, reason string) Statement {
	return Finish(stepID, worker, Parked, reason)
}

// Retry is Finish with Retried.
func Retry(stepID int64, worker, reason string) Statement {
	return Finish(stepID, worker, Retried, reason)
}

// DeadLetter is Finish with DeadLettered.
func DeadLetter(stepID int64, worker, reason string) Statement {
	return Finish(stepID, worker, DeadLettered, reason)
}

// Wait records on the attempt stepID, which Finish with Waited ended in
// the same transaction, why it waits (waitReason: no_quota, rate_limit,
// no_engine) and until when; claim_step leaves such attempts out of the
// retry budget, the reconciler counts the part as waiting until then.
func Wait(stepID int64, waitReason string, until time.Time) Statement {
	return Statement{Name: "record the wait", SQL: `UPDATE task_steps SET wait_reason = $2, wait_until = $3 WHERE id = $1`,
		Args: []any{stepID, waitReason, until}}
}

// Refuse is Finish with Refused.
func Refuse(stepID int64, worker, reason string) Statement {
	return Finish(stepID, worker, Refused, reason)
}

// AddPart records that a step of task has a part and the message emitted
// for it, so that a part whose message is lost before it ran can be
// re-driven from what was sent. A part recorded before is kept.
func AddPart(task uuid.UUID, step, part string, message []byte) Statement {
	return Statement{Name: "add part", SQL: `INSERT INTO step_parts (task_id, step, part, message) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		Args: []any{task, step, part, message}}
}

// AddNewPart is AddPart that also adds the message to the outbox (under
// messageID, exchange and routingKey), only when the part was not recorded
// before; the statement returns the outbox row's id, or NULL when the part
// was known (a redelivered or replayed message sends nothing twice).
func AddNewPart(task uuid.UUID, step, part string, message []byte, messageID uuid.UUID, exchange, routingKey string) Statement {
	return Statement{Name: "add new part", SQL: `WITH part AS (
	INSERT INTO step_parts (task_id, step, part, message) VALUES ($1, $2, $3, $4)
	ON CONFLICT DO NOTHING RETURNING 1
), sent AS (
	` + outboxrow.InsertFrom + `
	SELECT $5, $6, $7, $4 FROM part RETURNING id
)
SELECT (SELECT id FROM sent)`, Args: []any{task, step, part, message, messageID, exchange, routingKey}}
}

// EmitWhenDoneSQL is the fan-in (arguments: task id, step, next step, next
// part, message id, exchange, routing key, body): it records the next
// step's part and returns the outbox id of its message, or NULL when the
// step is not complete yet or the next part was already emitted.
const EmitWhenDoneSQL = `SELECT emit_when_done($1, $2, $3, $4, $5, $6, $7, $8)`

// Cover records, for a run of the whole tts step of task (the first dub)
// that left every segment with audio, each tts part not succeeded (parked,
// failed, waiting; version parts excluded) as succeeded by worker: the run
// synthesized their segments, so the step is complete (mux_video waits for
// every part) and a late copy of a part's message is skipped as done.
func Cover(task uuid.UUID, worker string) Statement {
	return Statement{Name: "cover parts", SQL: coverSQL, Args: []any{task, worker}}
}

const coverSQL = `INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at)
	SELECT p.task_id, p.step, p.part,
	       coalesce((SELECT max(s.attempt) FROM task_steps s WHERE s.task_id = p.task_id AND s.step = p.step AND s.part = p.part), 0) + 1,
	       'succeeded', $2, now(), now()
	  FROM step_parts p
	 WHERE p.task_id = $1 AND p.step = 'tts' AND p.part <> '' AND p.part NOT LIKE 'v%'
	   AND NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = p.task_id AND s.step = p.step
	                     AND s.part = p.part AND s.status IN ('succeeded', 'running'))`

// Closed is an attempt CloseEnded closed.
type Closed struct {
	TaskID     uuid.UUID
	Step, Part string
	// TaskStatus is the ended task's status (done or failed).
	TaskStatus string
}

// CloseEnded closes, as failed, up to limit running attempts of done or
// failed tasks whose lease ran out more than grace before now (nil: the
// database's clock): their worker died and nothing will take them over.
// Rows another transaction holds are skipped (replicas share the work).
func CloseEnded(ctx context.Context, q store.Querier, grace time.Duration, limit int, now *time.Time) ([]Closed, error) {
	rows, err := q.Query(ctx, `UPDATE task_steps s SET status = 'failed', finished_at = coalesce($3::timestamptz, now()), lease_until = NULL,
		       error = 'lease expired with no worker; task already ' || t.status
		  FROM tasks t
		 WHERE t.id = s.task_id AND t.status IN ('done', 'failed', 'cancelled')
		   AND s.id IN (SELECT s2.id FROM task_steps s2 JOIN tasks t2 ON t2.id = s2.task_id
		                 WHERE s2.status = 'running' AND s2.lease_until < coalesce($3::timestamptz, now()) - $1::interval
		                   AND t2.status IN ('done', 'failed', 'cancelled')
		                 ORDER BY s2.lease_until LIMIT $2 FOR UPDATE OF s2 SKIP LOCKED)
		RETURNING s.task_id, s.step, s.part, t.status`, grace, limit, now)
	if err != nil {
		return nil, fmt.Errorf("close expired attempts of ended tasks: %w", err)
	}
	closed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Closed, error) {
		var c Closed
		return c, row.Scan(&c.TaskID, &c.Step, &c.Part, &c.TaskStatus)
	})
	if err != nil {
		return nil, fmt.Errorf("close expired attempts of ended tasks: %w", err)
	}
	return closed, nil
}

// CloseExpired closes the attempt stepID as failed if it is still running
// with a lease that ran out before now (nil: the database's clock), so
// that its late outcome is refused; reason is recorded as its error. It
// reports false when the attempt was taken over or ended meanwhile.
func CloseExpired(ctx context.Context, q store.Querier, stepID int64, reason string, now *time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE task_steps SET status = 'failed', finished_at = coalesce($3::timestamptz, now()), lease_until = NULL,
			error = $2
		WHERE id = $1 AND status = 'running' AND lease_until < coalesce($3::timestamptz, now())`, stepID, reason, now)
	if err != nil {
		return false, fmt.Errorf("close expired attempt %d: %w", stepID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// InheritCTE is the attempts' part of a child task's spawn (pkg/task.Spawn,
// one statement): a common table expression named steps that records the
// parent's succeeded steps @inherited_steps as the child's, attempt 1,
// worker @worker, with the parent's first start and last finish, so that
// the child's later steps find their predecessors done and nothing runs
// twice. It reads the child made in the statement from the CTE created
// (id) and the parent from @parent.
const InheritCTE = `steps AS (
	INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at)
	SELECT c.id, s.step, '', 1, 'succeeded', @worker, s.started_at, s.finished_at
	  FROM created c,
	       (SELECT step, min(started_at) AS started_at, max(finished_at) AS finished_at FROM task_steps
	         WHERE task_id = @parent AND step = ANY(@inherited_steps::text[]) AND status = 'succeeded'
	         GROUP BY step) s`

// MaxHandBackDetail bounds the error kept with a hand-back, in bytes.
const MaxHandBackDetail = 500

// HandBack records that worker handed the message of attempt k back
// without an outcome, for reason (the step runtime's: shutdown,
// unavailable, lease_held, ...), with detail (the error, cut to
// MaxHandBackDetail bytes). Hand-backs of one attempt for one reason
// share a row that counts them (step_handbacks), so that a message handed
// back a thousand times is one row; the row keeps the first and the last
// time and the last worker and detail.
func HandBack(k Key, worker, reason, detail string) Statement {
	if len(detail) > MaxHandBackDetail {
		detail = strings.ToValidUTF8(detail[:MaxHandBackDetail], "")
	}
	return Statement{Name: "record hand-back", SQL: `INSERT INTO step_handbacks AS h (task_id, step, part, attempt, reason, worker, detail)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (task_id, step, part, attempt, reason) DO UPDATE
	   SET count = least(h.count, 2147483646) + 1, last_at = now(), worker = EXCLUDED.worker, detail = EXCLUDED.detail`,
		Args: []any{k.TaskID, k.Step, k.Part, k.Attempt, reason, worker, detail}}
}
