package step

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
)

// This file is the fair fan-out: a step fanned out into many parts keeps at
// most a window of them in the queues at once (EmitWindowed), and each part
// that succeeds lets the next one in (ReleaseWindow). A long task then holds
// a few places in a queue, not hundreds, so that the messages of the tasks
// submitted after it take turns with its own rather than wait behind them.
// Every part is registered at once (attempt.AddPart), so the step's fan-in still
// waits for all of them.

// holdSQL holds a part's message in its window and releases it at once if
// the window has room (arguments: task, step, part, window, message id,
// exchange, routing key, body); it returns the outbox id, else NULL. A part
// that already succeeded (a replay of the step that fanned out) is not
// held again.
const holdSQL = `SELECT hold_part($1, $2, $3, $4, $5, $6, $7, $8)`

// releaseHeldSQL releases, at commit, the held parts of a step the window
// has room for in the task's scope, the tasks in turn, and returns the
// outbox rows it added (arguments: task, step).
const releaseHeldSQL = `SELECT o_id, o_message_id, o_exchange, o_routing_key, o_body FROM release_held($1, $2)`

// EmitWindowed stages the next step's messages, one per payload, each a part
// of that step: they are all registered as parts now, and at most window
// of the parts of that step in the task's scope (its project, or the task
// alone) are in the queues at once; the others wait in held_parts until
// parts of the step succeed (ReleaseWindow). Parts may be held by several
// messages of a task, each emitting its own (the translate batches of each
// asr chunk).
func (m *Message) EmitWindowed(step string, window int, payloads []any) error {
	if window < 1 {
		return fmt.Errorf("emit %s: window %d: want at least 1", step, window)
	}
	for _, p := range payloads {
		next, part, body, err := m.nextPart(step, p)
		if err != nil {
			return err
		}
		// Each part is offered in order; release_part lets in only as
		// many as the window has room for (fewer when parts of the task's
		// project are in flight already, some others when parts of a
		// re-run succeeded before).
		o := outbox.New(wire.Exchange, wire.RoutingKey(step), body)
		m.stmts = append(m.stmts,
			statement(attempt.AddPart(next.TaskID, step, part, body)),
			stmt{sql: holdSQL, args: []any{next.TaskID, step, part, window, o.MessageID, o.Exchange, o.RoutingKey, o.Body}, outbox: o})
	}
	return nil
}

// ReleaseWindow stages, for the success of this message's part, the release
// of the next held parts of its step in its task's scope (its project, or
// the task alone), as many as the window has free, the scope's tasks in
// turn. The candidates are read in the success transaction under the
// window's lock, so that parts succeeding and parts held at the same moment
// neither overfill the window nor leave a part held with nothing in flight
// to release it.
func (m *Message) ReleaseWindow() {
	env := m.Envelope
	m.stmts = append(m.stmts, stmt{sql: releaseHeldSQL, args: []any{env.TaskID, env.Step}, released: true})
}

// StuckWindow is a task's step with parts held longer than the age asked.
type StuckWindow = attempt.StuckWindow

// ReleaseStuckWindows lets in, for at most limit steps of queued or running
// tasks with a part held longer than age (as of now; nil is the database's
// clock), the held parts their windows have room for
// (attempt.ReleaseStuck): the safety net for a release that never ran. The
// caller publishes the returned outbox rows.
func ReleaseStuckWindows(ctx context.Context, q store.Querier, age time.Duration, limit int, now *time.Time) ([]StuckWindow, error) {
	return attempt.ReleaseStuck(ctx, q, age, limit, now)
}

// FannedOutSQL is the SQL condition "the task's step was fanned out into
// named parts" — for asr, the task is a long recording cut into chunks —
// for a handler's own query to embed; task and step are SQL expressions
// (e.g. "$1", "'asr'").
func FannedOutSQL(task, step string) string { return attempt.FannedOutSQL(task, step) }

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
