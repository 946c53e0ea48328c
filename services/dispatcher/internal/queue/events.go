package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
)

// Integrator events, published to task_exchange under these routing keys.
const (
	// EventAssigned: an entry was assigned to an agent.
	EventAssigned = wire.EventPrefix + wire.EventWaitingAssigned
	// EventExpired: an entry ran out of attempts.
	EventExpired = wire.EventPrefix + "waiting.expired"
)

// addEvent adds the integrator event (wire.Event: event, task_id = the
// entry id, status, occurred_at, data = the entry as the HTTP API shows it)
// to the outbox inside tx, so it is published if and only if the change it
// reports commits.
func addEvent(ctx context.Context, tx pgx.Tx, routingKey string, e Entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode %s: %w", routingKey, err)
	}
	ev := wire.Event{
		Event:      strings.TrimPrefix(routingKey, wire.EventPrefix),
		TaskID:     e.ID,
		Status:     string(e.Status),
		OccurredAt: time.Now().UTC().Truncate(time.Microsecond),
		Data:       data,
	}
	body, err := ev.Marshal()
	if err != nil {
		return fmt.Errorf("encode %s: %w", routingKey, err)
	}
	return outbox.Add(ctx, tx, outbox.New(wire.Exchange, routingKey, body))
}
