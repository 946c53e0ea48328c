package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Integrator events, published to task_exchange under these routing keys.
const (
	// EventAssigned: an entry was assigned to an agent.
	EventAssigned = "event.waiting.assigned"
	// EventExpired: an entry ran out of attempts.
	EventExpired = "event.waiting.expired"
)

// eventExchange is the topic exchange events go through.
const eventExchange = "task_exchange"

// event is the shared envelope (DESIGN.md section 2) around an entry: the
// task id is the entry id, the step names the event, the payload is the
// entry as the HTTP API shows it.
type event struct {
	TaskID    uuid.UUID `json:"task_id"`
	Step      string    `json:"step"`
	Attempt   int       `json:"attempt"`
	TraceID   string    `json:"trace_id"`
	CreatedAt time.Time `json:"created_at"`
	Payload   Entry     `json:"payload"`
}

// eventStep names an event's step: "waiting_assigned" for
// "event.waiting.assigned".
func eventStep(routingKey string) string {
	switch routingKey {
	case EventAssigned:
		return "waiting_assigned"
	case EventExpired:
		return "waiting_expired"
	}
	return routingKey
}

// addEvent adds the event to the outbox inside tx, so it is published if
// and only if the change it reports commits.
func addEvent(ctx context.Context, tx pgx.Tx, routingKey string, e Entry) error {
	body, err := json.Marshal(event{
		TaskID:    e.ID,
		Step:      eventStep(routingKey),
		Attempt:   1,
		TraceID:   "waiting-" + e.ID.String(),
		CreatedAt: time.Now().UTC(),
		Payload:   e,
	})
	if err != nil {
		return fmt.Errorf("encode %s: %w", routingKey, err)
	}
	_, err = store.AddOutbox(ctx, tx, eventExchange, routingKey, body)
	return err
}
