package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SourceOutbox is dead_letters.source of an outbox message the broker kept
// refusing.
const SourceOutbox = "outbox"

// deadLetter moves outbox row m, refused for the n-th time with err, to
// dead_letters (source outbox, error class broker, the message as its
// original) and deletes the row, in tx. What the body names (task, step,
// attempt) is recorded with it, so that `dubctl dlq` shows it beside the
// task's other failures and can replay a task message.
func deadLetter(ctx context.Context, tx pgx.Tx, m *Message, n int, err error) error {
	var head struct {
		TaskID  uuid.UUID `json:"task_id"`
		Step    string    `json:"step"`
		Attempt int       `json:"attempt"`
	}
	var original *string
	if json.Unmarshal(m.Body, &head) == nil && !bytes.Contains(m.Body, []byte(`\u0000`)) {
		s := string(m.Body)
		original = &s
	}
	var task *uuid.UUID
	if head.TaskID != uuid.Nil {
		task = &head.TaskID
	}
	if wire.RoutingKey(head.Step) == "" {
		head.Step = ""
	}
	reason := fmt.Sprintf("the broker refused the outbox message %d times (exchange %q, routing key %q); last: %v",
		n, m.Exchange, m.RoutingKey, err)
	if _, err := tx.Exec(ctx, `INSERT INTO dead_letters (message_id, task_id, step, attempt, error_class,
			failure_reason, original_message, raw_body, routing_key, source)
		VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10)
		ON CONFLICT (message_id) WHERE message_id <> '' DO NOTHING`,
		"outbox:"+m.MessageID.String(), task, head.Step, max(head.Attempt, 0), wire.ClassBroker,
		wire.Reason(reason), original, m.Body, m.RoutingKey, SourceOutbox); err != nil {
		return fmt.Errorf("move outbox row %d to dead_letters: %w", m.ID, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = $1`, m.ID); err != nil {
		return fmt.Errorf("move outbox row %d to dead_letters: %w", m.ID, err)
	}
	return nil
}
