package step_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// TestMain runs up to 6 tests at once: each has its own database and
// virtual host (setup), and most of their time is spent waiting for leases,
// sweeps, backoffs and hand-backs to come round, not computing.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 6))
}

// harness is one isolated world for a runtime test: a fresh database, a
// fresh RabbitMQ virtual host with dubflow's topology, and a publisher.
type harness struct {
	t    testing.TB
	db   *testenv.Database
	url  string
	pub  *broker.Publisher
	conn *broker.Conn
	log  zerolog.Logger
}

func setup(t testing.TB) *harness {
	t.Helper()
	return setupOn(t, testenv.AMQP(t))
}

func setupOn(t testing.TB, url string) *harness {
	t.Helper()
	h := &harness{t: t, db: testenv.Postgres(t), url: url, log: testLogger(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := broker.Dial(ctx, url, "test-publish", h.log)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	h.conn = conn
	h.pub = broker.NewPublisher(conn)
	t.Cleanup(func() { _ = h.pub.Close(); _ = conn.Close() })
	if _, err := h.db.Pool.Exec(ctx, `CREATE TABLE effects (task_id uuid NOT NULL, step text NOT NULL,
		part text NOT NULL DEFAULT '', worker text NOT NULL DEFAULT '', at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatalf("create effects: %v", err)
	}
	return h
}

func testLogger(t testing.TB) zerolog.Logger {
	if os.Getenv("STEP_TEST_LOG") != "" {
		return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	return zerolog.Nop()
}

// options tweak a runner's configuration.
type options func(*step.Config)

// run starts a runner on queue with routes; it stops when the test ends.
func (h *harness) run(queue string, routes []step.Route, opts ...options) *step.Runner {
	h.t.Helper()
	r, stop := h.start(queue, routes, opts...)
	h.t.Cleanup(stop)
	return r
}

// start starts a runner on queue with routes and returns it with a stop
// that ends it and returns once every delivery it took is settled (acked
// or handed back); calling stop again does nothing.
func (h *harness) start(queue string, routes []step.Route, opts ...options) (*step.Runner, func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	conn, err := broker.Dial(dctx, h.url, "test-consume", h.log)
	if err != nil {
		h.t.Fatalf("dial consumer: %v", err)
	}
	topo := broker.Topology{}
	cfg := step.Config{
		Queue:         queue,
		Routes:        routes,
		Pool:          h.db.Pool,
		Source:        step.BrokerSource(conn, broker.ConsumeOptions{Queue: queue, Prefetch: 8, Concurrency: 8}),
		Publisher:     h.pub,
		Delay:         topo.DelayExchange,
		DLQ:           wire.QueueDLQ,
		MaxRetries:    3,
		Lease:         5 * time.Second,
		SweepInterval: 200 * time.Millisecond,
		SweepAge:      time.Second,
		ShutdownGrace: 5 * time.Second,
		Log:           h.log,
	}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := step.NewRunner(cfg)
	if err != nil {
		h.t.Fatalf("new runner: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	return r, func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					h.t.Errorf("runner: %v", err)
				}
			case <-time.After(30 * time.Second):
				h.t.Errorf("runner did not stop within 30s")
			}
			_ = conn.Close()
		})
	}
}

// withMetrics makes the runner count its metrics on reg.
func withMetrics(reg *prometheus.Registry) options {
	return func(c *step.Config) { c.Metrics = step.NewMetrics(reg) }
}

// counted reads dubflow_step_messages_total{step, outcome} from reg.
func counted(t testing.TB, reg *prometheus.Registry, stepName, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "dubflow_step_messages_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["step"] == stepName && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// channel opens a channel on the harness's connection; the caller closes
// it.
func (h *harness) channel() *amqp.Channel {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := h.conn.Channel(ctx)
	if err != nil {
		h.t.Fatalf("channel: %v", err)
	}
	return ch
}

// ready is the number of messages ready in queue.
func (h *harness) ready(queue string) int {
	h.t.Helper()
	ch := h.channel()
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		h.t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

// asrEnvelope returns a valid first-attempt asr message for a new task.
func asrEnvelope(t testing.TB) *wire.Envelope {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	env, err := wire.New(wire.StepASR, id, "", wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	if err != nil {
		t.Fatalf("new asr envelope: %v", err)
	}
	return env
}

func (h *harness) publish(env *wire.Envelope) {
	h.t.Helper()
	body, err := json.Marshal(env)
	if err != nil {
		h.t.Fatalf("marshal: %v", err)
	}
	h.publishRaw(wire.RoutingKey(env.Step), body)
}

func (h *harness) publishRaw(key string, body []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := h.pub.Publish(ctx, wire.Exchange, key, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body})
	if err != nil {
		h.t.Fatalf("publish %s: %v", key, err)
	}
}

// next waits for one message on queue and returns its body.
func (h *harness) next(queue string, within time.Duration) []byte {
	h.t.Helper()
	return h.nextDelivery(queue, within).Body
}

// deadLetter waits for one message on the dead-letter queue and decodes it.
func (h *harness) deadLetter(within time.Duration) *wire.DeadLetter {
	h.t.Helper()
	body := h.next(wire.QueueDLQ, within)
	dl, err := wire.DecodeDeadLetter(body)
	if err != nil {
		h.t.Fatalf("decode dead letter: %v\n%s", err, body)
	}
	return dl
}

// stepRows counts the task_steps rows of task in status.
func (h *harness) stepRows(task uuid.UUID, status string) int {
	h.t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM task_steps WHERE task_id = $1 AND status = $2`, task, status).Scan(&n); err != nil {
		h.t.Fatalf("count %s steps: %v", status, err)
	}
	return n
}

// outboxRows counts the rows left in the outbox.
func (h *harness) outboxRows() int {
	h.t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		h.t.Fatalf("count outbox: %v", err)
	}
	return n
}

func (h *harness) effects(task uuid.UUID) int {
	h.t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE task_id = $1`, task).Scan(&n); err != nil {
		h.t.Fatalf("count effects: %v", err)
	}
	return n
}

// effect is a handler that records one effect row in the step's commit.
func effect(calls *callLog) step.Handler {
	return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		calls.add(msg)
		msg.Exec(`INSERT INTO effects (task_id, step, part) VALUES ($1, $2, $3)`,
			msg.Envelope.TaskID, msg.Envelope.Step, msg.Part)
		return nil
	})
}

// callLog records handler calls.
type callLog struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	attempt int
	at      time.Time
	task    uuid.UUID
}

func (c *callLog) add(msg *step.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call{attempt: msg.Envelope.Attempt, at: time.Now(), task: msg.Envelope.TaskID})
}

func (c *callLog) snapshot() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.calls...)
}

func (c *callLog) len() int { return len(c.snapshot()) }

var errFlaky = errors.New("engine unavailable")

func amqpPublishing(body []byte) amqp.Publishing {
	return amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body}
}

// serveASR sets up a harness with a runner serving the asr queue with
// routes, and returns it with a first-attempt asr message of a new task,
// not yet published.
func serveASR(t *testing.T, routes []step.Route, opts ...options) (*harness, *wire.Envelope) {
	t.Helper()
	h := setup(t)
	h.run(wire.QueueASR, routes, opts...)
	return h, asrEnvelope(t)
}

// recorded is a handler that records each call in calls and returns what
// f returns.
func recorded(calls *callLog, f func(msg *step.Message) error) step.Handler {
	return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		calls.add(msg)
		return f(msg)
	})
}

// firstRuns is a handler whose first n runs call early before anything
// else — an error (or panic) from it ends the run — and whose every run
// that gets past it records the effect in calls; runs counts the runs.
func firstRuns(n int32, runs *atomic.Int32, calls *callLog, early func(ctx context.Context, msg *step.Message) error) step.Handler {
	do := effect(calls)
	return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		if runs.Add(1) <= n {
			if err := early(ctx, msg); err != nil {
				return err
			}
		}
		return do.Handle(ctx, msg)
	})
}
