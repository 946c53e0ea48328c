package relay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/internal/relay"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// A row the real broker refuses (no queue for its routing key) does not
// stay in the outbox forever: refused for the MaxFailures-th time, the sweep
// moves it to dead_letters with the refusal as its reason and counts it; a
// row refused fewer times stays to be tried again, and a good row behind
// them is published.
func TestARowTheBrokerKeepsRefusingIsDeadLettered(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	conn, err := broker.Dial(ctx, testenv.AMQP(t), "outbox-test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	task := uuid.New()
	body := `{"task_id":"` + task.String() + `","step":"asr","attempt":2}`
	for _, r := range []struct {
		key      string
		failures int
	}{{"task.nowhere", outbox.MaxFailures - 1}, {"task.nowhere", 0}, {wire.QueueASR, 0}} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO outbox (message_id, exchange, routing_key, body, failures, created_at)
			VALUES ($1, $2, $3, $4, $5, now() - interval '1 minute')`, uuid.New(), wire.Exchange, r.key, body, r.failures); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	relay := relay.New(db.Pool, broker.NewPublisher(conn), zerolog.Nop(), relay.NewMetrics(reg))
	if n, err := relay.Sweep(ctx, 0, 100); n != 1 || err == nil {
		t.Fatalf("sweep published %d, err %v; want the good row published and the refusals reported", n, err)
	}
	var left, failures int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(failures), 0) FROM outbox`).Scan(&left, &failures); err != nil {
		t.Fatal(err)
	}
	if left != 1 || failures != 1 {
		t.Errorf("outbox holds %d rows with %d failures; want only the row refused once", left, failures)
	}
	var source, class, reason, key, step string
	var taskID *uuid.UUID
	var attempt int
	err = db.Pool.QueryRow(ctx, `SELECT source, error_class, failure_reason, routing_key, task_id, step, attempt FROM dead_letters`).
		Scan(&source, &class, &reason, &key, &taskID, &step, &attempt)
	if err != nil {
		t.Fatalf("no dead letter for the row refused %d times: %v", outbox.MaxFailures, err)
	}
	if source != outbox.SourceOutbox || class != "broker" || key != "task.nowhere" || taskID == nil || *taskID != task ||
		step != "asr" || attempt != 2 || !strings.Contains(reason, "unroutable") || !strings.Contains(reason, "10 times") {
		t.Errorf("dead letter: source %q class %q key %q task %v step %q attempt %d reason %q", source, class, key, taskID, step, attempt, reason)
	}
	if got := deadLettered(t, reg, "task.nowhere"); got != 1 {
		t.Errorf("dubflow_outbox_dead_lettered_total = %v, want 1", got)
	}
}

// deadLettered reads dubflow_outbox_dead_lettered_total{routing_key=key}.
func deadLettered(t *testing.T, reg *prometheus.Registry, key string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "dubflow_outbox_dead_lettered_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "routing_key" && l.GetValue() == key {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
