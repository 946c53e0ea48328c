package step_test

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// nextDelivery waits for one message on queue and returns it whole.
func (h *harness) nextDelivery(queue string, within time.Duration) amqp.Delivery {
	h.t.Helper()
	ch := h.channel()
	defer ch.Close()
	var d amqp.Delivery
	testenv.EventuallyWithin(h.t, within, "a message on "+queue, func() bool {
		got, ok, err := ch.Get(queue, true)
		if err != nil {
			h.t.Fatalf("get %s: %v", queue, err)
		}
		d = got
		return ok
	})
	return d
}

// TestEventsAndTaskMessagesCarryAStableID: an event carries event_id, a task
// message message_id, each equal to its AMQP message_id — also when the
// outbox sweep publishes it again after the first publish was lost.
func TestEventsAndTaskMessagesCarryAStableID(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	ch, err := h.conn.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("test.events", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("test.events", wire.EventPrefix+"#", wire.Exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	fp := &failingPublisher{Publisher: h.pub, key: wire.EventPrefix + wire.EventTaskSucceeded}
	fp.broken.Store(true)
	h.run(wire.QueueASR, route(step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		ev := wire.Event{Event: wire.EventTaskSucceeded, TaskID: msg.Envelope.TaskID, Status: "done", OccurredAt: time.Now()}
		body, err := ev.Marshal()
		if err != nil {
			return err
		}
		msg.Publish(wire.Exchange, ev.RoutingKey(), body)
		return msg.Emit(wire.StepTranslate, wire.Translate{TaskID: msg.Envelope.TaskID, SegmentIDs: []string{"seg-0"},
			SourceLanguage: "en", TargetLanguage: "es", BatchSize: 20})
	})), func(c *step.Config) { c.Publisher = fp })
	env := asrEnvelope(t)
	h.publish(env)

	// The event's first publish was lost: its row waits in the outbox
	// under the event's id.
	var rowID uuid.UUID
	testenv.EventuallyWithin(t, 20*time.Second, "the event in the outbox", func() bool {
		return h.db.Pool.QueryRow(ctx, `SELECT message_id FROM outbox WHERE routing_key LIKE 'event.%'`).Scan(&rowID) == nil
	})
	fp.broken.Store(false)
	d := h.nextDelivery(wire.QueueTranslate, 30*time.Second)
	next, err := wire.Decode(d.Body)
	if err != nil {
		t.Fatal(err)
	}
	if next.MessageID == uuid.Nil || d.MessageId != next.MessageID.String() {
		t.Errorf("task message: message_id %v, AMQP message_id %q", next.MessageID, d.MessageId)
	}
	d = h.nextDelivery("test.events", 30*time.Second)
	ev, err := wire.DecodeEvent(d.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ev.EventID == uuid.Nil || ev.EventID != rowID || d.MessageId != ev.EventID.String() {
		t.Errorf("event: event_id %v, outbox message_id %v, AMQP message_id %q", ev.EventID, rowID, d.MessageId)
	}
}
