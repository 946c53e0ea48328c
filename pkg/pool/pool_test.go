package pool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/pool/pooltest"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// clock is a test clock: the real time moved by an offset.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time       { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Move(d time.Duration) { c.off.Add(int64(d)) }
func (c *clock) Set(at time.Time)     { c.off.Store(int64(time.Until(at))) }
func member(name string, f *pooltest.Fake) pool.Member {
	return pool.Member{Name: name, Kind: speech.EngineOpenAI, BaseURL: f.URL(), APIKey: pooltest.Key, Model: "glm-4-flash",
		Limits: pool.Limits{Concurrency: f.Concurrency, DailyQuota: int64(f.Quota)}}
}

// replica is one worker's view of the pool: its own Schedule and
// translators on the shared database.
func replica(t testing.TB, db pool.DB, clk *clock, members ...pool.Member) (*pool.Pool, *pool.Translator) {
	t.Helper()
	p := stepPool(t, db, clk, "translate", members...)
	tr, err := pool.NewTranslator(p, speech.Config{HTTPTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p, tr
}

// stepPool is one replica's pool of step on the shared database.
func stepPool(t testing.TB, db pool.DB, clk *clock, step string, members ...pool.Member) *pool.Pool {
	t.Helper()
	cfg := pool.Config{Engines: members}
	if err := cfg.Validate(pool.Kinds[step]); err != nil {
		t.Fatal(err)
	}
	p := &pool.Pool{Sched: &pool.Schedule{DB: db, Step: step, Cfg: cfg, Now: clk.Now, Lease: 10 * time.Second}}
	if err := p.Sched.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// quotaFakes are serving fakes named fake-0, fake-1, … with quotas, a
// concurrency of 2 and calls taking delay, and their pool members.
func quotaFakes(t *testing.T, delay time.Duration, quotas ...int) ([]*pooltest.Fake, []pool.Member) {
	var fakes []*pooltest.Fake
	var members []pool.Member
	for i, q := range quotas {
		f := pooltest.New(t, pooltest.Serve)
		f.Quota, f.Concurrency, f.Delay = q, 2, delay
		fakes = append(fakes, f)
		members = append(members, member(fmt.Sprintf("fake-%d", i), f))
	}
	return fakes, members
}

// concurrently runs call(0) … call(n-1) at once; each error fails the test.
func concurrently(t *testing.T, n int, call func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- call(i) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func status(t testing.TB, p *pool.Pool, name string) pool.Status {
	t.Helper()
	rows, err := pool.Read(context.Background(), p.Sched.DB, p.Sched.Step, p.Sched.Now(), p.Sched.Cfg.WindowStart)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no row for %s", name)
	return pool.Status{}
}

// TestPoolKeepsEachEnginesLimits: two replicas with 8 callers each share
// three engines with small quotas and concurrency; every call is served
// and no engine ever sees a call over its quota or its concurrency.
func TestPoolKeepsEachEnginesLimits(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	fakes, members := quotaFakes(t, 20*time.Millisecond, 400, 400, 600)
	_, a := replica(t, db.Pool, clk, members...)
	_, b := replica(t, db.Pool, clk, members...)
	const calls, text = 128, "ten chars." // 1280 characters of 1400
	trs := []*pool.Translator{a, b}
	concurrently(t, calls, func(i int) error {
		out, err := trs[i%2].Translate(context.Background(), []string{text}, "en", "es")
		if err == nil && (len(out) != 1 || out[0] != "ES: "+text) {
			err = fmt.Errorf("translation %q", out)
		}
		return err
	})
	served := 0
	for i, f := range fakes {
		c := f.Counters()
		served += c.Served
		if c.OverQuota != 0 || c.OverParallel != 0 || c.MaxInFlight > f.Concurrency || c.Units > f.Quota {
			t.Errorf("fake-%d saw %+v: over its quota %d or concurrency %d", i, c, f.Quota, f.Concurrency)
		}
	}
	if served != calls {
		t.Errorf("fakes served %d calls, want %d", served, calls)
	}
}

// TestRateLimitCoolsDownAndMovesOn: a 429 with Retry-After cools the
// engine down for that long and the call is served by the next engine; the
// next calls leave the cooled engine alone until then.
func TestRateLimitCoolsDownAndMovesOn(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	limited, ok := pooltest.New(t, pooltest.RateLimited), pooltest.New(t, pooltest.Serve)
	limited.RetryAfter = 120
	m := member("limited", limited)
	m.Weight = 10 // preferred while free
	p, tr := replica(t, db.Pool, clk, m, member("ok", ok))
	for range 3 {
		if _, err := tr.Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
			t.Fatal(err)
		}
	}
	if c := limited.Counters(); c.Calls != 1 {
		t.Errorf("limited engine called %d times, want once (then cooled down)", c.Calls)
	}
	if c := ok.Counters(); c.Served != 3 {
		t.Errorf("ok engine served %d, want 3", c.Served)
	}
	s := status(t, p, "limited")
	if wait := time.Until(s.NextAt) - time.Duration(clk.off.Load()); wait < 100*time.Second || wait > 121*time.Second {
		t.Errorf("limited engine available again in %s, want its Retry-After (120s)", wait)
	}
	if s.Used != 0 || !strings.Contains(s.LastError, "429") {
		t.Errorf("limited engine row %+v: want its units refunded and the 429 recorded", s)
	}
	// Past the cool-down the engine serves again.
	clk.Move(121 * time.Second)
	limited.SetMode(pooltest.Serve)
	if _, err := tr.Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
		t.Fatal(err)
	}
	if c := limited.Counters(); c.Served != 1 {
		t.Errorf("limited engine served %d after its cool-down, want 1", c.Served)
	}
}

// TestServerErrorsOpenTheBreaker: an engine answering 503 is skipped for
// the call, and after BreakerFailures errors in a row its breaker opens:
// calls stop reaching it until it has been open for BreakerOpen.
func TestServerErrorsOpenTheBreaker(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	bad, ok := pooltest.New(t, pooltest.ServerError), pooltest.New(t, pooltest.Serve)
	m := member("bad", bad)
	m.Weight = 100
	p, tr := replica(t, db.Pool, clk, m, member("ok", ok))
	for range 10 {
		if _, err := tr.Translate(context.Background(), []string{"hi"}, "en", "es"); err != nil {
			t.Fatal(err)
		}
	}
	if c := bad.Counters(); c.Calls != pool.BreakerFailures {
		t.Errorf("bad engine called %d times, want %d (then its breaker is open)", c.Calls, pool.BreakerFailures)
	}
	if s := status(t, p, "bad"); s.Breaker != "open" || s.Errors != pool.BreakerFailures {
		t.Errorf("bad engine: breaker %s, errors %d; want open, %d", s.Breaker, s.Errors, pool.BreakerFailures)
	}
	clk.Move(pool.BreakerOpen + time.Second)
	if s := status(t, p, "bad"); s.Breaker != "half_open" {
		t.Errorf("breaker %s after its open time, want half_open", s.Breaker)
	}
	bad.SetMode(pooltest.Serve)
	if _, err := tr.Translate(context.Background(), []string{"hi"}, "en", "es"); err != nil {
		t.Fatal(err)
	}
	if s := status(t, p, "bad"); s.Breaker != "closed" || bad.Counters().Served != 1 {
		t.Errorf("after a success: breaker %s, served %d; want closed, 1", s.Breaker, bad.Counters().Served)
	}
}

// TestHangingEngineIsLeftForTheNext: a call to an engine that never
// answers ends at the engine's timeout and moves to the next engine.
func TestHangingEngineIsLeftForTheNext(t *testing.T) {
	db := testenv.Postgres(t)
	hang, ok := pooltest.New(t, pooltest.Hang), pooltest.New(t, pooltest.Serve)
	m := member("hang", hang)
	m.Weight = 100
	p, tr := replica(t, db.Pool, &clock{}, m, member("ok", ok))
	if _, err := tr.Translate(context.Background(), []string{"hi"}, "en", "es"); err != nil {
		t.Fatal(err)
	}
	if ok.Counters().Served != 1 || hang.Counters().Calls != 1 {
		t.Errorf("hang %+v ok %+v: want one call each", hang.Counters(), ok.Counters())
	}
	if s := status(t, p, "hang"); s.InFlight != 0 || s.Failures != 1 {
		t.Errorf("hanging engine row %+v: want nothing in flight, one failure", s)
	}
}

// TestSpentPoolWaitsUntilTheReset: when every engine spent its quota the
// call returns fault.Wait no_quota until the next reset, without calling an
// engine; once the clock passes the reset the engines serve again.
func TestSpentPoolWaitsUntilTheReset(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	clk.Set(time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC))
	f := pooltest.New(t, pooltest.Serve)
	f.Quota = 10
	m := member("small", f)
	p, tr := replica(t, db.Pool, clk, m)
	p.Sched.Cfg.ResetHour = 14
	if _, err := tr.Translate(context.Background(), []string{"0123456789"}, "en", "es"); err != nil {
		t.Fatal(err)
	}
	_, err := tr.Translate(context.Background(), []string{"more"}, "en", "es")
	reason, until, ok := fault.WaitOf(err)
	if !ok || reason != fault.WaitNoQuota || !until.Equal(time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)) {
		t.Fatalf("spent pool: %v (%s until %s), want a wait no_quota until 14:00", err, reason, until)
	}
	if c := f.Counters(); c.Calls != 1 {
		t.Errorf("engine called %d times, want once", c.Calls)
	}
	clk.Set(time.Date(2026, 11, 28, 14, 0, 1, 0, time.UTC))
	f.ResetQuota()
	if _, err := tr.Translate(context.Background(), []string{"more"}, "en", "es"); err != nil {
		t.Fatalf("after the reset: %v", err)
	}
}

// TestEngineSaysQuotaSpent: an engine whose own quota runs out before the
// configured one (a 429 naming the quota) cools down until the reset and
// the call moves on; with every engine spent the step waits no_quota.
func TestEngineSaysQuotaSpent(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	a, b := pooltest.New(t, pooltest.Serve), pooltest.New(t, pooltest.Serve)
	a.Quota, b.Quota = 4, 4 // the engines' own; the pool thinks they have none
	ma, mb := member("a", a), member("b", b)
	ma.DailyQuota, mb.DailyQuota = 0, 0
	ma.Weight = 100
	_, tr := replica(t, db.Pool, clk, ma, mb)
	for _, want := range []string{"a", "b"} {
		if _, err := tr.Translate(context.Background(), []string{"four"}, "en", "es"); err != nil {
			t.Fatalf("call served by %s: %v", want, err)
		}
	}
	_, err := tr.Translate(context.Background(), []string{"four"}, "en", "es")
	if reason, _, ok := fault.WaitOf(err); !ok || reason != fault.WaitNoQuota {
		t.Fatalf("both engines spent: %v, want a no_quota wait", err)
	}
	if a.Counters().OverQuota != 1 || b.Counters().OverQuota != 1 {
		t.Errorf("each engine should be asked once past its quota, then left alone: a %+v b %+v", a.Counters(), b.Counters())
	}
	if _, err := tr.Translate(context.Background(), []string{"four"}, "en", "es"); err == nil || a.Counters().Calls != 2 {
		t.Errorf("a spent engine was called again before the reset")
	}
}

// TestDeadWorkersReservationExpires: a call whose worker dies holds its
// engine only until the reservation's lease ends.
func TestDeadWorkersReservationExpires(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	f := pooltest.New(t, pooltest.Serve)
	f.Concurrency = 1
	p, tr := replica(t, db.Pool, clk, member("one", f))
	p.LocalWait = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		// A worker that "dies" inside its call: its context never ends the
		// reservation (the release is lost with the process).
		_ = p.Do(ctx, 1, func(context.Context, string) error { close(started); <-ctx.Done(); return errDied })
	}()
	<-started
	_, err := tr.Translate(context.Background(), []string{"x"}, "en", "es")
	if reason, _, ok := fault.WaitOf(err); !ok || reason != fault.WaitRateLimit {
		t.Fatalf("engine busy: %v, want a rate_limit wait", err)
	}
	// Simulate the death: the reservation stays while the clock passes its lease.
	if _, err := db.Pool.Exec(context.Background(), `UPDATE engine_reservations SET expires_at = expires_at`); err != nil {
		t.Fatal(err)
	}
	clk.Move(11 * time.Second)
	if _, err := tr.Translate(context.Background(), []string{"x"}, "en", "es"); err != nil {
		t.Fatalf("after the dead call's lease: %v", err)
	}
	cancel()
}

var errDied = errors.New("worker died")
