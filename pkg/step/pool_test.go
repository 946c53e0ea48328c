package step_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/pool/pooltest"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// poolClock is the pools' clock in the test: the real time moved by an
// offset that the test moves.
type poolClock struct{ off atomic.Int64 }

func (c *poolClock) Now() time.Time   { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *poolClock) Set(at time.Time) { c.off.Store(int64(time.Until(at))) }

// TestPoolTasksWaitForQuotaAndResume: tasks over two replicas of a worker
// share a pool of three fake engines: one answers every call 429 with
// Retry-After, two have small daily quotas and concurrency 2. The tasks
// the quotas cover are done; the rest wait (no_quota, until the 14:00
// reset) without spending their retry budget, and go on by themselves
// when the clock passes the reset. No engine ever sees a call over its
// quota or its concurrency (the fakes' own counters).
func TestPoolTasksWaitForQuotaAndResume(t *testing.T) {
	t.Parallel()
	h := setup(t)
	clk := &poolClock{}
	// A day behind the real clock, so that the runtime re-offers the
	// waiting steps at once (every second) while the pool's clock says
	// the quota is spent until 14:00.
	reset := time.Now().UTC().Truncate(time.Hour).Add(-23 * time.Hour)
	clk.Set(reset.Add(-time.Hour))
	limited := pooltest.New(t, pooltest.RateLimited)
	limited.RetryAfter = 1
	a, b := pooltest.New(t, pooltest.Serve), pooltest.New(t, pooltest.Serve)
	for _, f := range []*pooltest.Fake{a, b} {
		f.Quota, f.Concurrency, f.Delay = 60, 2, 50*time.Millisecond
	}
	members := []pool.Member{fakeMember("limited", limited), fakeMember("a", a), fakeMember("b", b)}
	members[0].Weight = 10
	const tasks, text = 16, "ten chars." // 160 characters; the quotas cover 120
	ids := make([]uuid.UUID, tasks)
	for r := range 2 { // two replicas of the worker
		tr := poolTranslator(t, h, clk, reset.Hour(), members)
		h.run(wire.QueueASR, route(step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
			if _, err := tr.Translate(ctx, []string{text}, "en", "es"); err != nil {
				return err
			}
			msg.Exec(`INSERT INTO effects (task_id, step, worker) VALUES ($1, $2, $3)`, msg.Envelope.TaskID, msg.Envelope.Step, fmt.Sprint(r))
			return nil
		})))
	}
	for i := range ids {
		env := asrEnvelope(t)
		ids[i] = env.TaskID
		if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status) VALUES ($1, 'queued')`, env.TaskID); err != nil {
			t.Fatal(err)
		}
		h.publish(env)
	}
	testenv.EventuallyWithin(t, 60*time.Second, "the quotas' 12 tasks done and the other 4 waiting for the reset", func() bool {
		return h.count(`SELECT count(*) FROM effects`) == 12 &&
			h.count(`SELECT count(DISTINCT task_id) FROM task_steps WHERE wait_reason = 'no_quota' AND wait_until = $1`, reset) == 4
	})
	testenv.EventuallyWithin(t, 30*time.Second, "the waiting tasks re-offered past their retry budget", func() bool {
		return h.count(`SELECT min(n) FROM (SELECT count(*) AS n FROM task_steps WHERE wait_until IS NOT NULL GROUP BY task_id) w`) > 4
	})
	var waiting uuid.UUID
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT task_id FROM task_steps WHERE wait_reason = 'no_quota' LIMIT 1`).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	// Between two re-offers the read model shows the wait (while an
	// attempt runs, it shows it running).
	want := fmt.Sprintf("waiting for quota until %s UTC", reset.Format("15:04"))
	testenv.EventuallyWithin(t, 10*time.Second, "the read model to show "+want, func() bool {
		v, err := view.Load(context.Background(), h.db.Pool, waiting)
		if err != nil {
			t.Fatal(err)
		}
		return v.Waiting != nil && v.Waiting.Message == want && v.Waiting.Reason == "no_quota"
	})
	a.ResetQuota()
	b.ResetQuota()
	clk.Set(reset.Add(time.Second))
	testenv.EventuallyWithin(t, 60*time.Second, "every task done after the reset", func() bool { return h.count(`SELECT count(*) FROM effects`) == tasks })
	for _, id := range ids {
		if n := h.effects(id); n != 1 {
			t.Errorf("task %s: %d effects, want 1", id, n)
		}
	}
	if n := h.count(`SELECT count(*) FROM task_steps WHERE status = 'failed' AND wait_until IS NULL`); n != 0 {
		t.Errorf("%d attempts failed outside a wait: a 429 or a spent quota spent retry budget", n)
	}
	if n := h.ready(wire.QueueDLQ); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	for name, f := range map[string]*pooltest.Fake{"a": a, "b": b, "limited": limited} {
		c := f.Counters()
		if c.OverQuota != 0 || c.OverParallel != 0 || (f.Concurrency > 0 && c.MaxInFlight > f.Concurrency) {
			t.Errorf("engine %s saw %+v: a call over its quota or concurrency", name, c)
		}
	}
	if c := limited.Counters(); c.Calls == 0 || c.Served != 0 {
		t.Errorf("the rate-limited engine: %+v, want calls answered 429 only", c)
	}
}

// fakeMember is a pool member for a fake engine with its limits.
func fakeMember(name string, f *pooltest.Fake) pool.Member {
	return pool.Member{Name: name, Kind: speech.EngineOpenAI, BaseURL: f.URL(), APIKey: pooltest.Key, Model: "glm-4-flash",
		Limits: pool.Limits{Concurrency: f.Concurrency, DailyQuota: int64(f.Quota)}}
}

// poolTranslator is one replica's pool of translators on the harness's
// database, its quotas resetting at resetHour (UTC).
func poolTranslator(t *testing.T, h *harness, clk *poolClock, resetHour int, members []pool.Member) *pool.Translator {
	t.Helper()
	cfg := pool.Config{ResetHour: resetHour, Engines: members}
	if err := cfg.Validate(pool.Kinds[wire.StepTranslate]); err != nil {
		t.Fatal(err)
	}
	p := &pool.Pool{Sched: &pool.Schedule{DB: h.db.Pool, Step: wire.StepTranslate, Cfg: cfg, Now: clk.Now}}
	if err := p.Sched.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr, err := pool.NewTranslator(p, speech.Config{HTTPTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// count runs a query that returns one number.
func (h *harness) count(query string, args ...any) int {
	h.t.Helper()
	var n *int
	if err := h.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	if n == nil {
		return 0
	}
	return *n
}

// TestWaitingPartIsNotIdle: the reconciler counts a part whose last
// attempt waits for an engine as active until its wait ends, not as lost.
func TestWaitingPartIsNotIdle(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	id := uuid.New()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tasks (id, status) VALUES ($1, 'running')`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, started_at, finished_at, error, wait_reason, wait_until)
		VALUES ($1, 'asr', '', 1, 'failed', now() - interval '2 hours', now() - interval '2 hours', 'no quota', 'no_quota', now() + interval '1 hour')`, id); err != nil {
		t.Fatal(err)
	}
	th := step.PendingThresholds{Idle: time.Minute, LeaseGrace: time.Minute}
	idle := func(now *time.Time) int {
		parts, err := step.IdlePendingParts(ctx, db.Pool, wire.StepASR, th, time.Time{}, 10, now)
		if err != nil {
			t.Fatal(err)
		}
		return len(parts)
	}
	if n := idle(nil); n != 0 {
		t.Errorf("%d idle parts while the part waits for quota, want 0", n)
	}
	later := time.Now().Add(2 * time.Hour)
	if n := idle(&later); n != 1 {
		t.Errorf("%d idle parts long after its wait ended, want 1 (the reconciler re-drives it)", n)
	}
}
