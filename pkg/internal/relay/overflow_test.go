package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/internal/relay"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestFullWorkQueueRefusesThenDeadLetters is seed 001's "a queue at its
// maximum length dead-letters", as dubflow keeps it (proto/README.md,
// "Queue length"): an operator's max-length policy on a work queue (the
// topology's reject-publish overflow, which at-least-once dead-lettering
// needs) makes the broker refuse a publish to the full queue instead of
// dropping its oldest message; the outbox keeps the refused row and tries
// it again, publishing it once the queue has room, and a row refused
// MaxFailures times is moved to dead_letters (class broker, the refusal
// as its reason). Nothing was dropped and nothing reached task.dlq.
func TestFullWorkQueueRefusesThenDeadLetters(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := broker.Dial(ctx, url, "overflow-test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testenv.Policy(t, url, "work-queue-length", `^task\.asr$`, `{"max-length": 1}`)
	pub := broker.NewPublisher(conn, broker.WithRefusalPatience(500*time.Millisecond))
	relay := relay.New(db.Pool, pub, zerolog.Nop(), nil)
	deleting, stopDeleting := context.WithCancel(ctx)
	deleted := make(chan struct{})
	go func() { defer close(deleted); relay.DeleteLoop(deleting) }()
	defer func() { stopDeleting(); <-deleted }()
	first := addRow(t, db, "first")
	if err := relay.Publish(ctx, []*outbox.Message{first}); err != nil {
		t.Fatalf("first publish, the queue empty: %v", err)
	}
	// The policy applies within moments: until then rows are accepted too
	// (counted); a quorum queue refuses once it holds more than its limit.
	refused, accepted := fill(t, ctx, db, relay)
	accepted++
	testenv.EventuallyWithin(t, 10*time.Second, "the published rows deleted, the refused one kept", func() bool {
		return outboxRows(t, db) == 1
	})
	var kept int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM outbox`).Scan(&kept); err != nil || kept != refused.ID {
		t.Fatalf("outbox keeps row %d (%v), want the refused %d", kept, err, refused.ID)
	}
	ch, err := conn.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	head, ok, err := ch.Get(wire.QueueASR, true)
	if err != nil || !ok || !strings.Contains(string(head.Body), `"first"`) {
		t.Fatalf("head of task.asr = %q (%v, %v): want the first message, not dropped for the newer one", head.Body, ok, err)
	}
	for range accepted - 1 {
		if _, _, err := ch.Get(wire.QueueASR, true); err != nil {
			t.Fatal(err)
		}
	}
	// Room again: the sweep publishes the refused row.
	if n, err := relay.Sweep(ctx, 0, 10); n != 1 || err != nil {
		t.Fatalf("sweep with room published %d (%v), want the refused row", n, err)
	}
	// A queue that stays full: the row refused for the MaxFailures-th time
	// goes to dead_letters.
	last, _ := fill(t, ctx, db, relay)
	testenv.EventuallyWithin(t, 10*time.Second, "the published rows deleted", func() bool { return outboxRows(t, db) == 1 })
	if _, err := db.Pool.Exec(ctx, `UPDATE outbox SET failures = $2 WHERE id = $1`, last.ID, outbox.MaxFailures-1); err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Sweep(ctx, 0, 10); n != 0 || err == nil {
		t.Fatalf("sweep of the full queue published %d (%v), want a refusal", n, err)
	}
	var class, reason string
	if err := db.Pool.QueryRow(ctx, `SELECT error_class, failure_reason FROM dead_letters WHERE routing_key = $1`,
		wire.QueueASR).Scan(&class, &reason); err != nil {
		t.Fatalf("no dead letter for the row the full queue refused %d times: %v", outbox.MaxFailures, err)
	}
	if class != "broker" || !strings.Contains(reason, "nack") {
		t.Errorf("dead letter class %q reason %q, want broker and the nack", class, reason)
	}
	if q, err := ch.QueueDeclarePassive(wire.QueueDLQ, true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Errorf("task.dlq holds %d messages (%v): the broker dead-lettered by overflow", q.Messages, err)
	}
}

// fill publishes new rows through relay until the broker refuses one (the
// queue is full), and returns it with how many were accepted before it.
func fill(t *testing.T, ctx context.Context, db *testenv.Database, relay *relay.Relay) (*outbox.Message, int) {
	t.Helper()
	accepted := 0
	var refused *outbox.Message
	testenv.EventuallyWithin(t, 30*time.Second, "a publish to the full queue refused", func() bool {
		m := addRow(t, db, "more")
		err := relay.Publish(ctx, []*outbox.Message{m})
		if err == nil {
			accepted++
			return false
		}
		if !errors.Is(err, broker.ErrNacked) {
			t.Fatalf("publish to the full queue: %v, want broker.ErrNacked", err)
		}
		refused = m
		return true
	})
	return refused, accepted
}

// addRow adds an asr message to the outbox, committed, and returns it.
func addRow(t *testing.T, db *testenv.Database, what string) *outbox.Message {
	t.Helper()
	body := `{"task_id":"` + uuid.NewString() + `","step":"asr","attempt":1,"what":"` + what + `"}`
	m := outbox.New(wire.Exchange, wire.RoutingKey(wire.StepASR), []byte(body))
	if err := outbox.Add(context.Background(), db.Pool, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// outboxRows counts the rows of the outbox.
func outboxRows(t *testing.T, db *testenv.Database) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
