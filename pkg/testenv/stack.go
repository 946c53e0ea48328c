package testenv

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Stack runs one service under test on a fresh database, virtual host and
// bucket, with a channel to publish to and read from its virtual host.
type Stack struct {
	T    *testing.T
	DB   *Database
	Env  map[string]string
	Blob *blob.Store
	// Ch is a channel on the stack's virtual host, open once Start returns.
	Ch *amqp.Channel
	// Events is a queue bound to event.# on the exchange, declared by Start.
	Events string
	run    func(ctx context.Context, environ map[string]string) error
}

// NewStack prepares the backing services and the environment of a service
// whose entry point is run (extra overrides the environment); Start runs it.
func NewStack(t *testing.T, run func(ctx context.Context, environ map[string]string) error, extra map[string]string) *Stack {
	t.Helper()
	db := Postgres(t)
	amqpURL := AMQP(t)
	b := S3(t)
	env := map[string]string{
		"DATABASE_URL": db.URL, "AMQP_URL": amqpURL,
		"S3_ENDPOINT": b.Endpoint, "S3_ACCESS_KEY": b.AccessKey, "S3_SECRET_KEY": b.SecretKey,
		"S3_BUCKET": b.Name, "S3_USE_SSL": strconv.FormatBool(b.UseSSL),
		"OPS_ADDR": FreeAddr(t), "LOG_LEVEL": "warn", "SHUTDOWN_GRACE_SECONDS": "5",
	}
	for k, v := range extra {
		env[k] = v
	}
	store, err := blob.New(config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey,
		Bucket: b.Name, UseSSL: b.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	return &Stack{T: t, DB: db, Env: env, Blob: store, run: run}
}

// Start runs the service in-process until the test ends or stop is called,
// waits until it is ready, and opens the test's channel.
func (s *Stack) Start() (stop func()) {
	t := s.T
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx, s.Env) }()
	stop = sync.OnceFunc(func() {
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
	t.Cleanup(stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("worker exited early: %v", err)
		default:
		}
		resp, err := http.Get("http://" + s.Env["OPS_ADDR"] + "/readyz")
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
	if s.Ch != nil {
		return stop
	}
	conn, err := amqp.Dial(s.Env["AMQP_URL"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if s.Ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	q, err := s.Ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ch.QueueBind(q.Name, wire.EventPrefix+"#", wire.Exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	s.Events = q.Name
	return stop
}

// Publish sends a task message to the exchange under its routing key.
func (s *Stack) Publish(env *wire.Envelope) {
	s.T.Helper()
	body, err := json.Marshal(env)
	if err != nil {
		s.T.Fatal(err)
	}
	s.PublishRaw(env.RoutingKey(), body)
}

// PublishRaw sends body to the exchange under key.
func (s *Stack) PublishRaw(key string, body []byte) {
	s.T.Helper()
	err := s.Ch.PublishWithContext(context.Background(), wire.Exchange, key, false, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body})
	if err != nil {
		s.T.Fatal(err)
	}
}

// Next waits for the next message on queue and returns its body.
func (s *Stack) Next(queue string, within time.Duration) []byte {
	s.T.Helper()
	deadline := time.Now().Add(within)
	for {
		d, ok, err := s.Ch.Get(queue, true)
		if err != nil {
			s.T.Fatalf("get from %s: %v", queue, err)
		}
		if ok {
			return d.Body
		}
		if time.Now().After(deadline) {
			s.T.Fatalf("no message on %s within %s", queue, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Depth returns the number of ready messages on queue.
func (s *Stack) Depth(queue string) int {
	s.T.Helper()
	q, err := s.Ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		s.T.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

// WaitStep waits until the task's step has an attempt in one of the
// statuses and returns it.
func (s *Stack) WaitStep(id uuid.UUID, step string, statuses ...string) string {
	s.T.Helper()
	var got string
	s.WaitFor("step "+step+" to finish", func() bool {
		err := s.DB.Pool.QueryRow(context.Background(), `SELECT status FROM task_steps
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

// WaitFor polls cond until it holds, failing the test after a minute.
func (s *Stack) WaitFor(what string, cond func() bool) {
	s.T.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.T.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TaskRow is a task's row.
type TaskRow struct {
	Status, SourceLanguage, TargetLanguage, SpeakerID, Error, TraceID string
	SourceVideoKey, OutputVideoKey                                    string
	Result                                                            map[string]any
}

// Task reads the task's row.
func (s *Stack) Task(id uuid.UUID) TaskRow {
	s.T.Helper()
	var r TaskRow
	err := s.DB.Pool.QueryRow(context.Background(), `SELECT status, source_language, target_language,
		speaker_id, error, trace_id, source_video_key, output_video_key, result FROM tasks WHERE id = $1`, id).
		Scan(&r.Status, &r.SourceLanguage, &r.TargetLanguage, &r.SpeakerID, &r.Error, &r.TraceID,
			&r.SourceVideoKey, &r.OutputVideoKey, &r.Result)
	if err != nil {
		s.T.Fatalf("read task %s: %v", id, err)
	}
	return r
}

// FreeAddr returns a loopback address with a port free at this moment.
func FreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
