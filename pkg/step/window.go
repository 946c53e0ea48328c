package step

import (
	"context"
	"fmt"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file is the fair fan-out: a step fanned out into many parts keeps at
// most a window of them in the queues at once (EmitWindowed), and each part
// that succeeds lets the next one in (ReleaseWindow). A long task then holds
// a few places in a queue, not hundreds, so that the messages of the tasks
// submitted after it take turns with its own rather than wait behind them.
// Every part is registered at once (attempt.AddPart), so the step's fan-in still
// waits for all of them.

// holdSQL keeps a part's message back (arguments: task, step, part, window,
// message id, exchange, routing key, body).
// A part that already succeeded (a replay of the step that fanned out) is
// not held again.
var holdSQL = `INSERT INTO held_parts (task_id, step, part, window_size, message_id, exchange, routing_key, body)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8
	 WHERE NOT ` + attempt.SucceededSQL("$1", "$2", "$3") + `
	ON CONFLICT DO NOTHING`

// releaseSQL releases a held part into the outbox if its window has room and
// returns the outbox id, else NULL (arguments: task, step, part).
const releaseSQL = `SELECT release_part($1, $2, $3)`

// EmitWindowed stages the next step's messages, one per payload, each a part
// of that step: they are all registered as parts now, and at most window
// of the task's parts of that step are in the queues at once; the others
// wait in held_parts until parts of the step succeed (ReleaseWindow).
func (m *Message) EmitWindowed(step string, window int, payloads []any) error {
	if window < 1 {
		return fmt.Errorf("emit %s: window %d: want at least 1", step, window)
	}
	var release []stmt
	for _, p := range payloads {
		next, part, body, err := m.nextPart(step, p)
		if err != nil {
			return err
		}
		o := outbox.New(wire.Exchange, wire.RoutingKey(step), body)
		m.stmts = append(m.stmts,
			statement(attempt.AddPart(next.TaskID, step, part, body)),
			stmt{sql: holdSQL, args: []any{next.TaskID, step, part, window, o.MessageID, o.Exchange, o.RoutingKey, o.Body}})
		// Each part is offered in order; release_part lets in only as
		// many as the window has room for (fewer when parts of the task's
		// project are in flight already, some others when parts of a
		// re-run succeeded before).
		release = append(release, stmt{sql: releaseSQL, args: []any{next.TaskID, step, part}, outbox: o})
	}
	m.stmts = append(m.stmts, release...)
	return nil
}

// Querier reads rows: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// candidatesSQL lists the held parts a success may release (arguments:
// task, step): those of the task's scope — its project's live tasks, or the
// task alone without a project — taking the tasks in turn: a task's n-th
// held part ranks n plus the parts it has in flight, so the task with the
// fewest places in the queue goes first; as many as the window.
var candidatesSQL = `WITH scope AS (
	    SELECT coalesce((SELECT project FROM tasks WHERE id = $1), '') AS project
	), cand AS (
	    SELECT h.task_id, h.part, h.message_id, h.exchange, h.routing_key, h.body, h.window_size, h.seq,
	           row_number() OVER (PARTITION BY h.task_id ORDER BY h.seq) AS turn
	      FROM held_parts h, scope
	     WHERE h.step = $2 AND (h.task_id = $1 OR (scope.project <> '' AND h.task_id IN
	           (SELECT t.id FROM tasks t WHERE t.project = scope.project AND t.status IN ('queued', 'running'))))
	), flight AS (
	    ` + attempt.InFlightSQL("$2", "SELECT DISTINCT task_id FROM cand") + `
	)
	SELECT cand.task_id, part, message_id, exchange, routing_key, body
	  FROM cand LEFT JOIN flight ON flight.task_id = cand.task_id
	 ORDER BY turn + coalesce(flight.n, 0), seq LIMIT (SELECT max(window_size) FROM cand)`

// ReleaseWindow stages, for the success of this message's part, the release
// of the next held parts of its step in its task's scope (its project, or
// the task alone), as many as the window may have free, the project's tasks
// in turn. It reads the candidates now; the release itself is decided in
// the success transaction, so that parts succeeding at the same moment
// neither overfill the window nor leave it short.
func (m *Message) ReleaseWindow(ctx context.Context, q Querier) error {
	env := m.Envelope
	rows, err := q.Query(ctx, candidatesSQL, env.TaskID, env.Step)
	if err != nil {
		return fmt.Errorf("read held parts of %s/%s: %w", env.TaskID, env.Step, err)
	}
	defer rows.Close()
	for rows.Next() {
		var task uuid.UUID
		var part string
		o := &outbox.Message{}
		if err := rows.Scan(&task, &part, &o.MessageID, &o.Exchange, &o.RoutingKey, &o.Body); err != nil {
			return fmt.Errorf("read held parts of %s/%s: %w", env.TaskID, env.Step, err)
		}
		m.stmts = append(m.stmts, stmt{sql: releaseSQL, args: []any{task, env.Step, part}, outbox: o})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read held parts of %s/%s: %w", env.TaskID, env.Step, err)
	}
	return nil
}

// emitWhenStepsDoneSQL is the fan-in over several steps (arguments: task,
// steps, next step, next part, message id, exchange, routing key, body).
const emitWhenStepsDoneSQL = `SELECT emit_when_steps_done($1, $2, $3, $4, $5, $6, $7, $8)`

// EmitWhenStepsDone stages the next step's message for a fan-in over this
// message's step and the steps in also: it is emitted only by the part
// whose success completes the last of them, exactly once however many
// parts of any of them finish at the same moment. Every part that may
// complete one of the steps must stage it, with the same steps.
func (m *Message) EmitWhenStepsDone(step string, payload any, also ...string) error {
	return m.emitWhen(emitWhenStepsDoneSQL, step, payload, append([]string{m.Envelope.Step}, also...))
}
