package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/localstack"
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

// Backends are a test's fresh database, virtual host and bucket.
type Backends struct {
	DB      *Database
	AMQPURL string
	Bucket  *Bucket
}

// NewBackends prepares a fresh database, virtual host and bucket, each
// removed when the test ends.
func NewBackends(tb testing.TB) *Backends {
	tb.Helper()
	return &Backends{DB: Postgres(tb), AMQPURL: AMQP(tb), Bucket: S3(tb)}
}

// Env is the environment a dubflow service reads to use the backends
// (DATABASE_URL, AMQP_URL, S3_*), with extra added over it. The stack's
// presign user (S3_PRESIGN_*, which `make test` exports) may use only the
// stack's own bucket, not this test's: Env unsets it, and a test that
// wants one passes its own (PresignUser) in extra.
func (b *Backends) Env(extra map[string]string) map[string]string {
	env := map[string]string{
		"DATABASE_URL": b.DB.URL, "AMQP_URL": b.AMQPURL,
		"S3_ENDPOINT": b.Bucket.Endpoint, "S3_ACCESS_KEY": b.Bucket.AccessKey, "S3_SECRET_KEY": b.Bucket.SecretKey,
		"S3_BUCKET": b.Bucket.Name, "S3_USE_SSL": strconv.FormatBool(b.Bucket.UseSSL),
		"S3_PRESIGN_ACCESS_KEY": "", "S3_PRESIGN_SECRET_KEY": "",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// Store opens the bucket as the services open theirs.
func (b *Bucket) Store(tb testing.TB) *blob.Store {
	tb.Helper()
	store, err := blob.New(config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey,
		Bucket: b.Name, UseSSL: b.UseSSL})
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

// Channel opens a connection to url and a channel on it, both closed when
// the test ends.
func Channel(tb testing.TB, url string) *amqp.Channel {
	tb.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		tb.Fatalf("dial %s: %v", url, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatalf("open channel: %v", err)
	}
	return ch
}

// NewStack prepares the backing services and the environment of a service
// whose entry point is run (extra overrides the environment); Start runs it.
func NewStack(t *testing.T, run func(ctx context.Context, environ map[string]string) error, extra map[string]string) *Stack {
	t.Helper()
	b := NewBackends(t)
	env := b.Env(map[string]string{"OPS_ADDR": FreeAddr(t), "LOG_LEVEL": "warn", "SHUTDOWN_GRACE_SECONDS": "5"})
	for k, v := range extra {
		env[k] = v
	}
	return &Stack{T: t, DB: b.DB, Env: env, Blob: b.Bucket.Store(t), run: run}
}

// Start runs the service in-process until the test ends or stop is called,
// waits until it is ready, and opens the test's channel.
func (s *Stack) Start() (stop func()) {
	t := s.T
	t.Helper()
	stopRun := Serve(t, s.run, s.Env)
	stop = sync.OnceFunc(func() {
		if err := stopRun(); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	if s.Ch != nil {
		return stop
	}
	s.Ch = Channel(t, s.Env["AMQP_URL"])
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

// Serve runs a service in-process, run(ctx, env), until the test ends or
// stop is called, and waits until its /readyz on env["OPS_ADDR"] answers
// 200. stop cancels ctx and returns what run returned; when the test does
// not call it, the test's cleanup does and fails the test on an error.
func Serve(tb testing.TB, run func(ctx context.Context, env map[string]string) error, env map[string]string) (stop func() error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var runErr error
	go func() {
		runErr = run(ctx, env)
		close(exited)
	}()
	stopOnce := sync.OnceValue(func() error {
		cancel()
		grace := Within(tb, 30*time.Second)
		select {
		case <-exited:
			return runErr
		case <-time.After(grace):
			return fmt.Errorf("still running %s after its context was cancelled", grace)
		}
	})
	var stopped atomic.Bool
	tb.Cleanup(func() {
		if err := stopOnce(); err != nil && !stopped.Load() {
			tb.Errorf("run: %v", err)
		}
	})
	WaitReady(tb, "service", env["OPS_ADDR"], exited, func() string {
		select {
		case <-exited:
			return fmt.Sprint(runErr)
		default:
			return "(still running)"
		}
	})
	return func() error {
		stopped.Store(true)
		return stopOnce()
	}
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

// Next waits for the next message on queue and returns its body; within
// is scaled by Within.
func (s *Stack) Next(queue string, within time.Duration) []byte {
	s.T.Helper()
	within = Within(s.T, within)
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

// NextMessage takes the next message off queue (see Next, within 10 s),
// decodes its payload into payload and returns it.
func (s *Stack) NextMessage(t testing.TB, queue string, payload any) *wire.Envelope {
	t.Helper()
	m, err := wire.Decode(s.Next(queue, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.UnmarshalPayload(payload); err != nil {
		t.Fatal(err)
	}
	return m
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

// WaitFor polls cond until it holds (see Eventually).
func (s *Stack) WaitFor(what string, cond func() bool) {
	s.T.Helper()
	Eventually(s.T, what, cond)
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

// Refused checks that the task failed with an error naming reason and that
// its message was dead-lettered as permanent, naming reason; it returns
// both for further checks.
func (s *Stack) Refused(t testing.TB, id uuid.UUID, reason string) (TaskRow, *wire.DeadLetter) {
	t.Helper()
	task := s.Task(id)
	if task.Status != "failed" || !strings.Contains(task.Error, reason) {
		t.Errorf("task = %+v, want failed naming %q", task, reason)
	}
	dl, err := wire.DecodeDeadLetter(s.Next(wire.QueueDLQ, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if dl.TaskID != id || dl.ErrorClass != wire.ClassPermanent || !strings.Contains(dl.FailureReason, reason) {
		t.Errorf("dead letter = %+v, want a permanent one of task %s naming %q", dl, id, reason)
	}
	return task, dl
}

// Expect publishes env and waits until its task's step ends: it fails t
// unless the step ended as want ("succeeded" or "failed"), and, when it
// failed, unless the task was refused naming reason (see Refused). It
// returns the task's row.
func (s *Stack) Expect(t testing.TB, env *wire.Envelope, step, want, reason string) TaskRow {
	t.Helper()
	s.Publish(env)
	if got := s.WaitStep(env.TaskID, step, "succeeded", "failed"); got != want {
		t.Fatalf("%s %s, want %s: %+v", step, got, want, s.Task(env.TaskID))
	}
	if want != "failed" {
		return s.Task(env.TaskID)
	}
	task, _ := s.Refused(t, env.TaskID, reason)
	return task
}

// FreeAddr returns a loopback address with a port free at this moment and
// never returned before in this process (localstack.FreeAddr).
func FreeAddr(t testing.TB) string {
	t.Helper()
	a, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Drain takes the messages waiting in queue off it and returns them
// decoded, oldest first.
func Drain(tb testing.TB, ch *amqp.Channel, queue string) []*wire.Envelope {
	tb.Helper()
	var out []*wire.Envelope
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			tb.Fatalf("get from %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		env, err := wire.Decode(d.Body)
		if err != nil {
			tb.Fatalf("message in %s: %v", queue, err)
		}
		out = append(out, env)
	}
}
