// Package outbox is dubflow's transactional outbox. A message is added to
// the outbox table in the same Postgres transaction as the change it
// announces (Add, or InsertSQL staged in a batch); after the commit it is
// published with a publisher confirm and its row deleted (Commit, which
// runs the transaction and then publishes; the step runtime's relay,
// pkg/internal/relay, for a step's success). Rows that a crash or a broker
// outage left behind are published by a sweep (Sweep: the relay's periodic
// one, the start-up recovery's), so every committed message reaches the
// broker at least once; consumers skip duplicates by the message id. A row
// the broker refuses MaxFailures times is moved to the dead letters.
package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/outboxrow"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Message is one message of the outbox.
type Message struct {
	// ID is the outbox row, 0 until the message was added.
	ID int64
	// MessageID is the message's stable id, published as the AMQP
	// message-id: every publish of the row carries the same one.
	MessageID  uuid.UUID
	Exchange   string
	RoutingKey string
	Body       []byte
}

// New returns a message, not added yet, under the id its body carries (an
// event's event_id, an envelope's message_id; see wire.MessageID), else a
// fresh one.
func New(exchange, routingKey string, body []byte) *Message {
	id, ok := wire.MessageID(body)
	if !ok {
		id = uuid.New()
	}
	return &Message{MessageID: id, Exchange: exchange, RoutingKey: routingKey, Body: body}
}

// InsertSQL adds a message to the outbox and returns its row id (arguments:
// Message.Args).
// The outbox table's statements are pkg/internal/outboxrow's, its one writer.
const InsertSQL = outboxrow.Insert

// Args are InsertSQL's arguments for m, for callers that stage the insert
// in a batch and read the id back themselves.
func (m *Message) Args() []any {
	return []any{m.MessageID, m.Exchange, m.RoutingKey, m.Body}
}

// Querier runs a statement that returns one row: a transaction, a
// connection or a pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Add adds m to the outbox inside the caller's transaction and sets m.ID.
// The message is published after the commit (Commit, the runtime's relay) or, if
// that never happens, by a sweep.
func Add(ctx context.Context, q Querier, m *Message) error {
	if err := q.QueryRow(ctx, InsertSQL, m.Args()...).Scan(&m.ID); err != nil {
		return fmt.Errorf("add %s message to outbox: %w", m.RoutingKey, err)
	}
	return nil
}

// Publisher publishes one message and waits for the broker's confirm.
type Publisher interface {
	Publish(ctx context.Context, exchange, routingKey string, msg amqp.Publishing) error
}

// Publishing is the AMQP message m is published as: persistent JSON carrying
// its message id and, in wire.ReadyAtHeader, when it is ready in its work
// queue (now, or now plus the delay of the delay tier it is published to).
func (m *Message) Publishing() amqp.Publishing {
	now := time.Now()
	return amqp.Publishing{
		MessageId:    m.MessageID.String(),
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		Timestamp:    now,
		Headers:      amqp.Table{wire.ReadyAtHeader: wire.ReadyAt(m.Exchange, now).UnixMilli()},
		Body:         m.Body,
	}
}
