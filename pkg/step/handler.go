package step

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// Handler does the work of one step for one message. It returns nil on
// success, an error marked Permanent for input no retry can fix, Park to stop
// the step for an operator, or any other error to have the message retried
// through the delay tiers.
type Handler interface {
	Handle(ctx context.Context, msg *Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, msg *Message) error

// Handle calls f(ctx, msg).
func (f HandlerFunc) Handle(ctx context.Context, msg *Message) error { return f(ctx, msg) }

// Route binds a step name to its handler on a Runner's queue.
type Route struct {
	// Step is the envelope's step name this route serves.
	Step string
	// After names the step that must have succeeded before this one runs
	// ("" for none). An early message waits in the delay tiers.
	After string
	// Timeout bounds one run of the handler.
	Timeout time.Duration
	// Handler does the work.
	Handler Handler
	// Admit, when set, checks a decoded message before its attempt is
	// claimed (what the schema cannot say). A message it refuses is
	// rejected as invalid: dead-lettered at once, never retried, and no
	// step row is written, so it is never taken for a duplicate of a
	// later message with the same ids.
	Admit func(env *wire.Envelope) error
}

// Message is one decoded task message handed to a Handler. Besides reading
// it, a handler stages what must be committed together with the step's
// success: SQL statements (Exec, Then) and the next messages (Emit,
// EmitWhenStepDone, Publish). The runtime commits them in one Postgres
// transaction with the step's status, and relays the messages afterwards.
type Message struct {
	// Envelope is the validated envelope.
	Envelope *wire.Envelope
	// Part names the part of a fanned-out step this message carries ("" for
	// single-message steps).
	Part string
	// Log carries task_id, step, attempt and trace_id.
	Log zerolog.Logger
	// Timeout bounds this run of the handler (the route's).
	Timeout time.Duration

	stmts []stmt
	fns   []func(ctx context.Context, tx pgx.Tx) error
	// outcomes are called with the outcome the runtime records for the run
	// (OnOutcome).
	outcomes []func(outcome string)
}

// OnOutcome asks the runtime to call fn, after the handler returned, with
// the outcome it records for this run: succeeded, retried, dead_lettered,
// parked, waited or refused (the task stopped while the step ran). fn is
// not called for a run whose outcome is not recorded (its lease lost, or
// the message handed back). Middleware that measures runs by their
// outcome registers here (Metrics.Middleware).
func (m *Message) OnOutcome(fn func(outcome string)) {
	m.outcomes = append(m.outcomes, fn)
}

// decided calls the OnOutcome functions with outcome, once.
func (m *Message) decided(outcome string) {
	fns := m.outcomes
	m.outcomes = nil
	for _, fn := range fns {
		fn(outcome)
	}
}

// stmt is one statement of the success transaction.
type stmt struct {
	sql  string
	args []any
	// outbox is set when the statement returns the id of the outbox row
	// it added (NULL when it added none): the message is kept in memory so
	// the runtime can publish it right after the commit.
	outbox *outbox.Message
	// transition is set when the statement is a task transition.
	transition *task.Transition
	// released is set when the statement returns the outbox rows it added
	// (id, message id, exchange, routing key, body): held parts it
	// released (ReleaseWindow).
	released bool
}

// statement stages one of the step attempts' transitions
// (pkg/internal/attempt).
func statement(s attempt.Statement) stmt { return stmt{sql: s.SQL, args: s.Args} }

// insert stages the insert of o into the outbox.
func insert(o *outbox.Message) stmt {
	return stmt{sql: outbox.InsertSQL, args: o.Args(), outbox: o}
}

// Decode unmarshals the payload into v. The payload was already validated
// against its schema, so an error here is permanent.
func (m *Message) Decode(v any) error {
	if err := json.Unmarshal(m.Envelope.Payload, v); err != nil {
		return fault.Permanent(fmt.Errorf("decode %s payload: %w", m.Envelope.Step, err))
	}
	return nil
}

// Exec stages a statement to run in the success transaction.
func (m *Message) Exec(sql string, args ...any) {
	m.stmts = append(m.stmts, stmt{sql: sql, args: args})
}

// Then stages a function to run inside the success transaction, before the
// staged statements. Prefer Exec: a message with no Then commits in a single
// round trip.
func (m *Message) Then(fn func(ctx context.Context, tx pgx.Tx) error) {
	m.fns = append(m.fns, fn)
}

// Emit stages the next step's message (same task and trace, attempt 1). It
// is added to the outbox in the success transaction and published after it.
func (m *Message) Emit(step string, payload any) error {
	next, part, body, err := m.nextPart(step, payload)
	if err != nil {
		return err
	}
	m.stmts = append(m.stmts,
		statement(attempt.AddPart(next.TaskID, step, part, body)),
		insert(outbox.New(wire.Exchange, wire.RoutingKey(step), body)))
	return nil
}

// EmitFor stages a message of another task — a child task the handler
// spawns in the same transaction (task.Spawn) — on the same trace. It is
// registered as a part of that task and sent only if that part was not
// registered before, so that a redelivered or replayed message that runs the
// handler again sends nothing twice.
func (m *Message) EmitFor(taskID uuid.UUID, step string, payload any) error {
	next, err := wire.New(step, taskID, m.Envelope.TraceID, payload)
	if err != nil {
		return fmt.Errorf("build %s message of %s: %w", step, taskID, err)
	}
	body, err := next.Marshal()
	if err != nil {
		return fmt.Errorf("encode %s message of %s: %w", step, taskID, err)
	}
	part, err := PartOf(next)
	if err != nil {
		return err
	}
	o := outbox.New(wire.Exchange, next.RoutingKey(), body)
	add := attempt.AddNewPart(taskID, step, part, body, o.MessageID, o.Exchange, o.RoutingKey)
	m.stmts = append(m.stmts, stmt{sql: add.SQL, args: add.Args, outbox: o})
	return nil
}

// EmitWhenStepDone stages the next step's message for fan-in: it is emitted
// only by the part whose success completes this step, exactly once however
// many parts finish at the same moment.
func (m *Message) EmitWhenStepDone(step string, payload any) error {
	return m.emitWhen(attempt.EmitWhenDoneSQL, step, payload, m.Envelope.Step)
}

// emitWhen stages the next step's message as the last arguments of a
// conditional emit (sql's arguments: task, the conditions, next step, next
// part, message id, exchange, routing key, body); the SQL function decides,
// under its per-task lock, whether this transaction emits it.
func (m *Message) emitWhen(sql, step string, payload any, conditions ...any) error {
	_, part, body, err := m.nextPart(step, payload)
	if err != nil {
		return err
	}
	o := outbox.New(wire.Exchange, wire.RoutingKey(step), body)
	args := append(append([]any{m.Envelope.TaskID}, conditions...), step, part, o.MessageID, o.Exchange, o.RoutingKey, o.Body)
	m.stmts = append(m.stmts, stmt{sql: sql, args: args, outbox: o})
	return nil
}

// Publish stages a message to any exchange and routing key (an event for
// integrators, a compensation message), committed with the step's success.
// It is published under the id its body carries (an event's event_id), else
// a fresh one: the same id on every republish (outbox.New).
func (m *Message) Publish(exchange, routingKey string, body []byte) {
	m.stmts = append(m.stmts, insert(outbox.New(exchange, routingKey, body)))
}

// Apply stages a change of the task's row (task.Start, task.Succeed, ...)
// in the success transaction; its event is published after the commit. A
// transition the task's status refuses (the task was cancelled or failed
// while the step ran, say) discards everything the step staged: the attempt
// is recorded as failed with the refusal as its reason, and the message is
// acked without retry or dead letter.
func (m *Message) Apply(t task.Transition) {
	m.stmts = append(m.stmts, stmt{sql: t.SQL, args: t.Args, transition: &t})
}

// nextPart is next plus the part the message is for.
func (m *Message) nextPart(step string, payload any) (*wire.Envelope, string, []byte, error) {
	next, body, err := m.next(step, payload)
	if err != nil {
		return nil, "", nil, err
	}
	part, err := PartOf(next)
	if err != nil {
		return nil, "", nil, err
	}
	return next, part, body, nil
}

// next builds the envelope of the next step and its body.
func (m *Message) next(step string, payload any) (*wire.Envelope, []byte, error) {
	next, err := m.Envelope.Next(step, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("build %s message: %w", step, err)
	}
	body, err := json.Marshal(next)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s message: %w", step, err)
	}
	return next, body, nil
}
