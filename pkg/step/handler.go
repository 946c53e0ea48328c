package step

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/store"
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

	stmts []stmt
	fns   []func(ctx context.Context, tx pgx.Tx) error
}

// stmt is one statement of the success transaction.
type stmt struct {
	sql    string
	args   []any
	outbox *outMsg // set when the statement returns an outbox id
}

// outMsg is a message added to the outbox, kept in memory so the runtime can
// publish it right after the commit.
type outMsg struct {
	id         int64
	messageID  uuid.UUID
	exchange   string
	routingKey string
	body       []byte
}

// Decode unmarshals the payload into v. The payload was already validated
// against its schema, so an error here is permanent.
func (m *Message) Decode(v any) error {
	if err := json.Unmarshal(m.Envelope.Payload, v); err != nil {
		return Permanent(fmt.Errorf("decode %s payload: %w", m.Envelope.Step, err))
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
	next, body, err := m.next(step, payload)
	if err != nil {
		return err
	}
	part, err := PartOf(next)
	if err != nil {
		return err
	}
	o := &outMsg{messageID: next.MessageID, exchange: broker.Exchange, routingKey: wire.RoutingKey(step), body: body}
	m.stmts = append(m.stmts,
		stmt{sql: store.AddPartSQL, args: []any{next.TaskID, step, part, body}},
		stmt{sql: store.AddOutboxSQL, args: []any{o.messageID, o.exchange, o.routingKey, o.body}, outbox: o})
	return nil
}

// EmitWhenStepDone stages the next step's message for fan-in: it is emitted
// only by the part whose success completes this step, exactly once however
// many parts finish at the same moment.
func (m *Message) EmitWhenStepDone(step string, payload any) error {
	next, body, err := m.next(step, payload)
	if err != nil {
		return err
	}
	part, err := PartOf(next)
	if err != nil {
		return err
	}
	o := &outMsg{messageID: next.MessageID, exchange: broker.Exchange, routingKey: wire.RoutingKey(step), body: body}
	m.stmts = append(m.stmts, stmt{
		sql:    store.EmitWhenDoneSQL,
		args:   []any{m.Envelope.TaskID, m.Envelope.Step, step, part, o.messageID, o.exchange, o.routingKey, o.body},
		outbox: o,
	})
	return nil
}

// Publish stages a message to any exchange and routing key (an event for
// integrators, a compensation message), committed with the step's success.
// It is published under the id its body carries (an event's event_id), else
// a fresh one: the same id on every republish (store.OutboxMessageID).
func (m *Message) Publish(exchange, routingKey string, body []byte) {
	o := &outMsg{messageID: store.OutboxMessageID(body), exchange: exchange, routingKey: routingKey, body: body}
	m.stmts = append(m.stmts, stmt{sql: store.AddOutboxSQL,
		args: []any{o.messageID, o.exchange, o.routingKey, o.body}, outbox: o})
}

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

// parkError stops a step without retry and without dead letter.
type parkError struct{ err error }

func (e *parkError) Error() string { return e.err.Error() }
func (e *parkError) Unwrap() error { return e.err }

// Park stops the step without a retry and without a dead letter, committing
// what the handler staged (its compensation messages, say); the attempt is
// recorded as parked with err as its reason, and an operator re-drives it
// later with a fresh retry budget. Park(nil) is nil.
func Park(err error) error {
	if err == nil {
		return nil
	}
	return &parkError{err: err}
}

// IsParked reports whether err was made by Park.
func IsParked(err error) bool {
	var p *parkError
	return errors.As(err, &p)
}
