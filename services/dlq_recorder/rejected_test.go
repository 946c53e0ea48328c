package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// badBodies are messages every worker rejects before its handler: not
// JSON, wrong types, an unknown step, oversized, a hostile key, and a valid
// message of a step no work queue serves. The same bytes go to every queue.
func badBodies(t *testing.T) map[string][]byte {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	asr, err := wire.New(wire.StepASR, id, "trace-bad", wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	if err != nil {
		t.Fatal(err)
	}
	valid, err := json.Marshal(asr)
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := wire.New(wire.StepWaitingCancel, uuid.New(), "trace-bad", map[string]string{"entry_id": uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	wrongStep, err := json.Marshal(waiting)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"not json":     []byte(`{"task_id": `),
		"wrong types":  []byte(strings.Replace(string(valid), `"attempt":1`, `"attempt":"one"`, 1)),
		"unknown step": []byte(strings.Replace(string(valid), `"step":"asr"`, `"step":"karaoke"`, 1)),
		"oversized":    []byte(`{"task_id":"` + uuid.NewString() + `","pad":"` + strings.Repeat("x", 2<<20) + `"}`),
		"hostile key":  []byte(strings.Replace(string(valid), keys.SourceAudio, "audios/../../etc/passwd", 1)),
		"wrong step":   wrongStep,
	}
}

// TestEveryRejectedDeliveryIsRecordedOnce: six bad bodies published to each
// of the five work queues and rejected by the real workers become 30 dead
// letters, each naming the step and queue it was consumed from — the same
// bytes on five queues are five records, also under one message id. Each
// message is published twice (a redelivery: the same queue, body and
// message id, or no id), and the second is recorded as a duplicate, not a
// new dead letter.
func TestEveryRejectedDeliveryIsRecordedOnce(t *testing.T) {
	t.Parallel()
	f := newFlow(t, nil)
	f.start(append(append([]string{}, workers...), "dlq_recorder")...)
	bodies := badBodies(t)
	published := 0
	for _, queue := range wire.WorkQueues {
		i := 0
		for name, body := range bodies {
			msg := amqp.Publishing{ContentType: "application/json", Body: body}
			if i%2 == 0 {
				// The same message id on every queue.
				msg.MessageId = "bad-" + strings.ReplaceAll(name, " ", "-")
			}
			i++
			for range 2 {
				if err := f.pub.Publish(context.Background(), wire.Exchange, queue, msg); err != nil {
					t.Fatalf("publish %s to %s: %v", name, queue, err)
				}
				published++
			}
		}
	}
	want := len(wire.WorkQueues) * len(bodies)
	rec := f.procs["dlq_recorder"].Addr
	testenv.Eventually(t, fmt.Sprintf("%d deliveries recorded or recognised as duplicates", published), func() bool {
		return scrape(t, rec, "dubflow_dead_letters_total")+scrape(t, rec, "dubflow_dead_letters_duplicate_total") >= float64(published)
	})
	if n := scrape(t, rec, "dubflow_dead_letters_total"); n != float64(want) {
		t.Errorf("recorder counted %v dead letters, want %d", n, want)
	}
	rows, err := f.db.Pool.Query(context.Background(), `SELECT step, routing_key, error_class, count(*)
		FROM dead_letters GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	total := 0
	perStep := map[string]int{}
	for rows.Next() {
		var stepName, key, class string
		var n int
		if err := rows.Scan(&stepName, &key, &class, &n); err != nil {
			t.Fatal(err)
		}
		t.Logf("step %-13s queue %-17s class %s: %d", stepName, key, class, n)
		if key != wire.RoutingKey(stepName) || class != wire.ClassInvalid {
			t.Errorf("%d dead letters of step %q recorded under routing key %q, class %q; want the queue of the step, invalid",
				n, stepName, key, class)
		}
		perStep[stepName] += n
		total += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if total != want {
		t.Errorf("%d dead letters recorded, want %d (%d bodies × %d queues)", total, want, len(bodies), len(wire.WorkQueues))
	}
	for _, s := range wire.Pipeline {
		if perStep[s] != len(bodies) {
			t.Errorf("step %s: %d dead letters, want %d", s, perStep[s], len(bodies))
		}
	}
}
