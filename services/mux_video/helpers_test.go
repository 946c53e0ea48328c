package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// stack is the worker under test on a fresh database, virtual host and
// bucket, with a channel to publish to and read from its virtual host.
type stack struct {
	t      *testing.T
	db     *testenv.Database
	env    map[string]string
	blob   *blob.Store
	ch     *amqp.Channel
	events string // a queue bound to event.#
}

// newStack prepares the services and the worker's environment (extra
// overrides it); start runs the worker.
func newStack(t *testing.T, extra map[string]string) *stack {
	t.Helper()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	b := testenv.S3(t)
	env := map[string]string{
		"DATABASE_URL": db.URL, "AMQP_URL": amqpURL,
		"S3_ENDPOINT": b.Endpoint, "S3_ACCESS_KEY": b.AccessKey, "S3_SECRET_KEY": b.SecretKey,
		"S3_BUCKET": b.Name, "S3_USE_SSL": strconv.FormatBool(b.UseSSL),
		"OPS_ADDR": freeAddr(t), "LOG_LEVEL": "warn", "SHUTDOWN_GRACE_SECONDS": "5",
	}
	for k, v := range extra {
		env[k] = v
	}
	store, err := blob.New(config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey,
		Bucket: b.Name, UseSSL: b.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	return &stack{t: t, db: db, env: env, blob: store}
}

// start runs run() in-process until the test ends, waits until it is
// ready, and opens the test's channel.
func (s *stack) start() {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, s.env) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("run did not stop")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("worker exited early: %v", err)
		default:
		}
		resp, err := http.Get("http://" + s.env["OPS_ADDR"] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("worker not ready after 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn, err := amqp.Dial(s.env["AMQP_URL"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if s.ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	q, err := s.ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ch.QueueBind(q.Name, wire.EventPrefix+"#", wire.Exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	s.events = q.Name
}

// publish sends a task message to the exchange under its routing key.
func (s *stack) publish(env *wire.Envelope) {
	s.t.Helper()
	body, err := json.Marshal(env)
	if err != nil {
		s.t.Fatal(err)
	}
	s.publishRaw(env.RoutingKey(), body)
}

func (s *stack) publishRaw(key string, body []byte) {
	s.t.Helper()
	err := s.ch.PublishWithContext(context.Background(), wire.Exchange, key, false, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body})
	if err != nil {
		s.t.Fatal(err)
	}
}

// next waits for the next message on queue and returns its body.
func (s *stack) next(queue string, within time.Duration) []byte {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		d, ok, err := s.ch.Get(queue, true)
		if err != nil {
			s.t.Fatalf("get from %s: %v", queue, err)
		}
		if ok {
			return d.Body
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no message on %s within %s", queue, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// depth returns the number of ready messages on queue.
func (s *stack) depth(queue string) int {
	s.t.Helper()
	q, err := s.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		s.t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

// waitStep waits until the task's step has an attempt in one of the
// statuses and returns it.
func (s *stack) waitStep(id uuid.UUID, step string, statuses ...string) string {
	s.t.Helper()
	var got string
	s.waitFor("step "+step+" to finish", func() bool {
		err := s.db.Pool.QueryRow(context.Background(), `SELECT status FROM task_steps
			WHERE task_id = $1 AND step = $2 AND status <> 'running' ORDER BY attempt DESC, id DESC LIMIT 1`, id, step).Scan(&got)
		for _, st := range statuses {
			if err == nil && got == st {
				return true
			}
		}
		return false
	})
	return got
}

// waitFor polls cond until it holds, failing the test after a minute.
func (s *stack) waitFor(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// taskRow is a task's row.
type taskRow struct {
	Status, SourceLanguage, TargetLanguage, SpeakerID, Error, TraceID string
	SourceVideoKey, OutputVideoKey                                    string
	Result                                                            map[string]any
}

func (s *stack) task(id uuid.UUID) taskRow {
	s.t.Helper()
	var r taskRow
	err := s.db.Pool.QueryRow(context.Background(), `SELECT status, source_language, target_language,
		speaker_id, error, trace_id, source_video_key, output_video_key, result FROM tasks WHERE id = $1`, id).
		Scan(&r.Status, &r.SourceLanguage, &r.TargetLanguage, &r.SpeakerID, &r.Error, &r.TraceID,
			&r.SourceVideoKey, &r.OutputVideoKey, &r.Result)
	if err != nil {
		s.t.Fatalf("read task %s: %v", id, err)
	}
	return r
}

// freeAddr returns a loopback address with a port free at this moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
