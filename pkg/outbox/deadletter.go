package outbox

import (
	"context"
	"fmt"

	"github.com/dubflow/dubflow/pkg/internal/deadletter"
	"github.com/dubflow/dubflow/pkg/internal/outboxrow"
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
// attempt: wire.PeekHead) is recorded with it, so that `dubctl dlq` shows
// it beside the task's other failures and can replay a task message.
func deadLetter(ctx context.Context, tx pgx.Tx, m *Message, n int, err error) error {
	reason := fmt.Sprintf("the broker refused the outbox message %d times (exchange %q, routing key %q); last: %v",
		n, m.Exchange, m.RoutingKey, err)
	e := &deadletter.Entry{MessageID: "outbox:" + m.MessageID.String(), ErrorClass: wire.ClassBroker,
		Reason: wire.Reason(reason), Raw: m.Body, RoutingKey: m.RoutingKey, Source: SourceOutbox}
	if head, ok := wire.PeekHead(m.Body); ok {
		e.Original, e.Step, e.Attempt = m.Body, head.Step, head.Attempt
		if head.TaskID != uuid.Nil {
			e.TaskID = &head.TaskID
		}
	}
	if _, err := deadletter.Insert(ctx, tx, e); err != nil {
		return fmt.Errorf("move outbox row %d to dead_letters: %w", m.ID, err)
	}
	if err := outboxrow.Delete(ctx, tx, []int64{m.ID}); err != nil {
		return fmt.Errorf("move outbox row %d to dead_letters: %w", m.ID, err)
	}
	return nil
}
