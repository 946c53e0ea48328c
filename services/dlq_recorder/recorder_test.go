package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
)

// stack is one test's recorder on a fresh database and virtual host.
type stack struct {
	db      *testenv.Database
	amqpURL string
	ch      *amqp.Channel
	ops     string
	events  <-chan amqp.Delivery
}

// deliveryLimit is the work queues' x-delivery-limit in these tests, small
// so that a poison message reaches task.dlq quickly.
const deliveryLimit = 2

func setup(t *testing.T) *stack {
	t.Helper()
	s := &stack{db: testenv.Postgres(t), amqpURL: testenv.AMQP(t)}
	s.ch = testenv.Channel(t, s.amqpURL)
	if err := (broker.Topology{DeliveryLimit: deliveryLimit}).Declare(s.ch); err != nil {
		t.Fatalf("declare topology: %v", err)
	}
	// The event queue is exclusive: declared, bound and consumed on the
	// connection of the channel that reads it.
	evch := testenv.Channel(t, s.amqpURL)
	q, err := evch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatalf("declare event queue: %v", err)
	}
	if err := evch.QueueBind(q.Name, "event.#", wire.Exchange, false, nil); err != nil {
		t.Fatalf("bind event queue: %v", err)
	}
	if s.events, err = evch.Consume(q.Name, "", true, true, false, false, nil); err != nil {
		t.Fatalf("consume events: %v", err)
	}
	s.ops = testenv.FreeAddr(t)
	env := map[string]string{
		"DATABASE_URL": s.db.URL, "AMQP_URL": s.amqpURL, "OPS_ADDR": s.ops,
		"QUEUE_DELIVERY_LIMIT": fmt.Sprint(deliveryLimit), "LOG_LEVEL": "debug",
	}
	testenv.Serve(t, func(ctx context.Context, env map[string]string) error { return run(ctx, env, testWriter{t}) }, env)
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (s *stack) publish(t *testing.T, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	if err := s.ch.PublishWithContext(context.Background(), exchange, key, false, false, msg); err != nil {
		t.Fatalf("publish to %s: %v", key, err)
	}
}

// newTask inserts a running task and returns its id.
func newTask(t *testing.T, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO tasks (id, status, trace_id) VALUES ($1, 'running', 'trace-rec')`, id); err != nil {
		t.Fatalf("insert task: %v", err)
	}
	return id
}

func envelope(t *testing.T, stepName string, taskID uuid.UUID, attempt int) (*wire.Envelope, []byte) {
	t.Helper()
	var payload any
	keys := wire.DefaultKeys(taskID)
	switch stepName {
	case wire.StepASR:
		payload = wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR}
	case wire.StepTTS:
		payload = wire.TTS{TaskID: taskID}
	case wire.StepMuxVideo:
		payload = wire.MuxVideo{TaskID: taskID, SourceVideoKey: keys.SourceVideo, TTSAudioKey: keys.DubAudio,
			OutputVideoKey: keys.OutputVideo}
	default:
		t.Fatalf("no payload for %s", stepName)
	}
	env, err := wire.New(stepName, taskID, "trace-rec", payload)
	if err != nil {
		t.Fatalf("new envelope: %v", err)
	}
	env.Attempt = attempt
	body, err := env.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return env, body
}

type row struct {
	ID                          int64
	TaskID                      *uuid.UUID
	Step, Class, Reason, Source string
	RoutingKey                  string
	Attempt                     int
	Original                    []byte
}

func (s *stack) deadLetters(t *testing.T) []row {
	t.Helper()
	rows, err := s.db.Pool.Query(context.Background(), `SELECT id, task_id, step, error_class, failure_reason,
		source, routing_key, attempt, original_message FROM dead_letters ORDER BY id`)
	if err != nil {
		t.Fatalf("query dead letters: %v", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ID, &r.TaskID, &r.Step, &r.Class, &r.Reason, &r.Source, &r.RoutingKey,
			&r.Attempt, &r.Original); err != nil {
			t.Fatalf("scan: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func (s *stack) waitDeadLetters(t *testing.T, n int) []row {
	t.Helper()
	var got []row
	testenv.Eventually(t, fmt.Sprintf("%d dead letters", n), func() bool {
		got = s.deadLetters(t)
		return len(got) >= n
	})
	return got
}

func (s *stack) task(t *testing.T, id uuid.UUID) (status, errText string) {
	t.Helper()
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT status, error FROM tasks WHERE id = $1`, id).
		Scan(&status, &errText); err != nil {
		t.Fatalf("read task: %v", err)
	}
	return status, errText
}

func (s *stack) event(t *testing.T) *wire.Event {
	t.Helper()
	select {
	case d := <-s.events:
		ev, err := wire.DecodeEvent(d.Body)
		if err != nil {
			t.Fatalf("decode event %s: %v", d.Body, err)
		}
		if d.RoutingKey != ev.RoutingKey() {
			t.Errorf("event routing key %s, want %s", d.RoutingKey, ev.RoutingKey())
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatalf("no event")
		return nil
	}
}

func TestServiceDeadLetterIsRecordedOnceAndFailsTheTask(t *testing.T) {
	t.Parallel()
	s := setup(t)
	taskID := newTask(t, s.db.Pool)
	env, body := envelope(t, wire.StepMuxVideo, taskID, 4)
	dl, err := wire.NewDeadLetter(body, env, wire.ClassPermanent, "no audio stream in tts/x/dub.wav", time.Now()).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	msg := amqp.Publishing{MessageId: "dl-1", ContentType: "application/json", Body: dl}
	s.publish(t, "", wire.QueueDLQ, msg)
	s.publish(t, wire.Exchange, wire.QueueDLQ, msg) // a redelivery: same message id

	got := s.waitDeadLetters(t, 1)
	r := got[0]
	if r.TaskID == nil || *r.TaskID != taskID || r.Step != wire.StepMuxVideo || r.Attempt != 4 ||
		r.Class != wire.ClassPermanent || r.Source != sourceService || r.RoutingKey != "task.mux_video" {
		t.Errorf("recorded %+v", r)
	}
	if !strings.Contains(r.Reason, "no audio stream") {
		t.Errorf("reason %q", r.Reason)
	}
	orig, err := wire.Decode(r.Original)
	if err != nil || orig.TaskID != taskID || orig.Step != wire.StepMuxVideo {
		t.Errorf("original message %s does not decode to the failed envelope: %v", r.Original, err)
	}
	status, errText := s.task(t, taskID)
	if status != "failed" || !strings.HasPrefix(errText, "mux_video: no audio stream") {
		t.Errorf("task %s %q, want failed with the step's error", status, errText)
	}
	ev := s.event(t)
	if ev.Event != wire.EventTaskFailed || ev.TaskID != taskID || ev.Step != wire.StepMuxVideo || ev.Status != "failed" {
		t.Errorf("event %+v", ev)
	}
	// The duplicate is consumed (acked) and recorded nowhere.
	testenv.Eventually(t, "task.dlq drained", func() bool {
		q, err := s.ch.QueueDeclarePassive(wire.QueueDLQ, true, false, false, false, nil)
		return err == nil && q.Messages == 0
	})
	if n := len(s.deadLetters(t)); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
}

func TestBrokerDeadLettersAreRecorded(t *testing.T) {
	t.Parallel()
	s := setup(t)
	poison, rejected, expired := newTask(t, s.db.Pool), newTask(t, s.db.Pool), newTask(t, s.db.Pool)

	// Delivery limit: a message handed back more often than the limit.
	_, body := envelope(t, wire.StepTTS, poison, 1)
	s.publish(t, wire.Exchange, wire.QueueTTS, amqp.Publishing{MessageId: "poison", Body: body})
	// Rejected without requeue.
	_, body = envelope(t, wire.StepASR, rejected, 2)
	s.publish(t, wire.Exchange, wire.QueueASR, amqp.Publishing{MessageId: "rejected", Body: body})
	// Expired: a per-message TTL (no worker consumes task.mux_video here).
	_, body = envelope(t, wire.StepMuxVideo, expired, 1)
	s.publish(t, wire.Exchange, wire.QueueMuxVideo, amqp.Publishing{MessageId: "expired", Expiration: "10", Body: body})

	for i := 0; i <= deliveryLimit; i++ {
		d := get(t, s.ch, wire.QueueTTS)
		if err := d.Nack(false, true); err != nil {
			t.Fatalf("nack: %v", err)
		}
	}
	if err := get(t, s.ch, wire.QueueASR).Reject(false); err != nil {
		t.Fatalf("reject: %v", err)
	}

	got := s.waitDeadLetters(t, 3)
	byTask := map[uuid.UUID]row{}
	for _, r := range got {
		if r.TaskID == nil {
			t.Fatalf("dead letter without task: %+v", r)
		}
		byTask[*r.TaskID] = r
	}
	for _, c := range []struct {
		task             uuid.UUID
		step, key, cause string
		attempt          int
	}{
		{poison, wire.StepTTS, "task.tts", "delivery limit", 1},
		{rejected, wire.StepASR, "task.asr", "rejected", 2},
		{expired, wire.StepMuxVideo, "task.mux_video", "TTL expired", 1},
	} {
		r, ok := byTask[c.task]
		if !ok {
			t.Errorf("%s: no dead letter", c.step)
			continue
		}
		if r.Source != sourceBroker || r.Class != wire.ClassBroker || r.Step != c.step || r.Attempt != c.attempt ||
			r.RoutingKey != c.key || !strings.Contains(r.Reason, c.cause) || !strings.Contains(r.Reason, c.key) {
			t.Errorf("%s: recorded %+v", c.step, r)
		}
		if _, err := wire.Decode(r.Original); err != nil {
			t.Errorf("%s: original %s: %v", c.step, r.Original, err)
		}
		if status, errText := s.task(t, c.task); status != "failed" || !strings.Contains(errText, c.cause) {
			t.Errorf("%s: task %s %q", c.step, status, errText)
		}
	}
}

func get(t *testing.T, ch *amqp.Channel, queue string) amqp.Delivery {
	t.Helper()
	var d amqp.Delivery
	testenv.Eventually(t, "a message in "+queue, func() bool {
		var ok bool
		var err error
		d, ok, err = ch.Get(queue, false)
		if err != nil {
			t.Fatalf("get %s: %v", queue, err)
		}
		return ok
	})
	return d
}

func TestDoneTasksAndStaleDuplicatesStayAsTheyAre(t *testing.T) {
	t.Parallel()
	s := setup(t)
	done, stale := newTask(t, s.db.Pool), newTask(t, s.db.Pool)
	ctx := context.Background()
	if _, err := s.db.Pool.Exec(ctx, `UPDATE tasks SET status = 'done' WHERE id = $1`, done); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status)
		VALUES ($1, 'tts', 1, 'succeeded')`, stale); err != nil {
		t.Fatal(err)
	}
	for i, id := range []uuid.UUID{done, stale} {
		_, body := envelope(t, wire.StepTTS, id, 1)
		s.publish(t, wire.Exchange, wire.QueueTTS, amqp.Publishing{MessageId: fmt.Sprint("m", i), Body: body})
		if err := get(t, s.ch, wire.QueueTTS).Reject(false); err != nil {
			t.Fatal(err)
		}
	}
	s.waitDeadLetters(t, 2)
	if status, _ := s.task(t, done); status != "done" {
		t.Errorf("done task became %s", status)
	}
	if status, _ := s.task(t, stale); status != "running" {
		t.Errorf("task whose tts succeeded became %s after a stale duplicate", status)
	}
}

func TestUnreadableMessagesAreKept(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.publish(t, "", wire.QueueDLQ, amqp.Publishing{Body: []byte("\x00not json")})
	s.publish(t, "", wire.QueueTTSCompensation, amqp.Publishing{MessageId: "bad-comp", Body: []byte(`{"task_id": 1}`)})
	got := s.waitDeadLetters(t, 2)
	for _, r := range got {
		if r.Class != wire.ClassInvalid || r.Source != sourceUnknown || r.TaskID != nil {
			t.Errorf("recorded %+v", r)
		}
	}
	var raw []byte
	if err := s.db.Pool.QueryRow(context.Background(),
		`SELECT raw_body FROM dead_letters WHERE message_id LIKE 'sha256:%'`).Scan(&raw); err != nil ||
		string(raw) != "\x00not json" {
		t.Errorf("raw body %q: %v", raw, err)
	}
}

func TestCompensationsAreRecordedPerSegment(t *testing.T) {
	t.Parallel()
	s := setup(t)
	taskID := newTask(t, s.db.Pool)
	publish := func(id string, idx int, cause string) {
		body, err := json.Marshal(wire.NewCompensation(taskID, idx, fmt.Errorf("%s", cause), "trace-rec", time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		s.publish(t, wire.Exchange, wire.QueueTTSCompensation, amqp.Publishing{MessageId: id, Body: body})
	}
	publish("c1", 3, "tts_service: 503")
	publish("c1", 3, "tts_service: 503") // redelivered
	publish("c2", 3, "tts_service: timeout")
	publish("c3", 7, "tts_service: 500")
	type seg struct {
		idx, times int
		last       string
	}
	var got []seg
	testenv.Eventually(t, "compensations recorded", func() bool {
		rows, err := s.db.Pool.Query(context.Background(), `SELECT segment_idx, times, last_error
			FROM tts_compensation_segments WHERE task_id = $1 ORDER BY segment_idx`, taskID)
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for rows.Next() {
			var g seg
			var times int64
			if err := rows.Scan(&g.idx, &times, &g.last); err != nil {
				t.Fatal(err)
			}
			g.times = int(times)
			got = append(got, g)
		}
		return len(got) == 2 && got[0].times+got[1].times == 3
	})
	if got[0].idx != 3 || got[0].times != 2 || got[1].idx != 7 || got[1].times != 1 || got[1].last != "tts_service: 500" {
		t.Errorf("segments %+v", got)
	}
}

func TestNothingIsAckedBeforeItIsRecorded(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	// Recording fails while the table is away.
	if _, err := s.db.Pool.Exec(ctx, `ALTER TABLE dead_letters RENAME TO dead_letters_away`); err != nil {
		t.Fatal(err)
	}
	taskID := newTask(t, s.db.Pool)
	env, body := envelope(t, wire.StepTTS, taskID, 1)
	dl, _ := wire.NewDeadLetter(body, env, wire.ClassTransient, "boom (gave up after 4 tries)", time.Now()).Marshal()
	s.publish(t, "", wire.QueueDLQ, amqp.Publishing{MessageId: "held", Body: dl})
	testenv.Eventually(t, "a failed recording", func() bool { return scrape(t, s.ops, "dubflow_recorder_errors_total") >= 2 })
	if status, _ := s.task(t, taskID); status != "running" {
		t.Errorf("task %s before the dead letter was recorded", status)
	}
	if _, err := s.db.Pool.Exec(ctx, `ALTER TABLE dead_letters_away RENAME TO dead_letters`); err != nil {
		t.Fatal(err)
	}
	got := s.waitDeadLetters(t, 1)
	if got[0].Class != wire.ClassTransient || got[0].Step != wire.StepTTS {
		t.Errorf("recorded %+v", got[0])
	}
	// The row commits before the recorder counts it: wait for the count.
	const metric = `dubflow_dead_letters_total{error_class="transient",source="service",step="tts"}`
	testenv.Eventually(t, "the dead letter to be counted", func() bool { return scrape(t, s.ops, metric) >= 1 })
	if n := scrape(t, s.ops, metric); n != 1 {
		t.Errorf("dead letter metric %v, want 1", n)
	}
}

// scrape returns the sum of the samples of a metric (a name, or a name with
// its labels) on the ops endpoint.
func scrape(t *testing.T, addr, metric string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if name == metric || strings.HasPrefix(name, metric+"{") {
			var v float64
			fmt.Sscan(value, &v)
			sum += v
		}
	}
	return sum
}
