package pool_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/pool/pooltest"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/jackc/pgx/v5"
)

// noLeaseRows: no lease row (or reservation) is left in the schedule.
func noLeaseRows(t *testing.T, db pool.DB, why string) {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM engine_reservations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d lease rows left, want none: %s", n, why)
	}
}

// TestLeaseGivenBackOnFlush: a replica's calls after its first are served
// from its lease (the row counts them only at the replica's next batch),
// the lease holds a slot and units ahead, counted in the row's in_flight
// and used (Leased saying how many units), and Flush gives them back: the
// row then counts exactly what the engine served, nothing in flight, no
// lease row left.
func TestLeaseGivenBackOnFlush(t *testing.T) {
	db := testenv.Postgres(t)
	f := pooltest.New(t, pooltest.Serve)
	f.Quota, f.Concurrency = 1000, 4
	p, tr := replica(t, db.Pool, &clock{}, member("one", f))
	p.Sched.LeaseIdle = time.Hour   // only Flush gives the lease back
	p.Sched.LeaseTerm = time.Minute // however slow the machine, the calls after the first are served from the lease
	for range 3 {
		if _, err := tr.Translate(context.Background(), []string{"ten chars."}, "en", "es"); err != nil {
			t.Fatal(err)
		}
	}
	served := int64(f.Counters().Units)
	s := status(t, p, "one")
	if served != 30 || s.Calls >= 3 || s.InFlight != 1 || s.Leased < 10 || s.Used-s.Leased > served || s.Used <= served {
		t.Errorf("before Flush: row %+v, %d calls; engine served %d units: want calls served from a lease (fewer than 3 counted yet), a slot and units held ahead", s.Load, s.Calls, served)
	}
	p.Sched.Flush()
	s = status(t, p, "one")
	if s.Used != served || s.Leased != 0 || s.InFlight != 0 || s.Calls != 3 {
		t.Errorf("after Flush: row %+v calls %d; want %d used (what the engine served), nothing leased or in flight, 3 calls", s.Load, s.Calls, served)
	}
	noLeaseRows(t, db.Pool, "Flush gave the lease back")
}

// TestDeadReplicasLeaseIsReclaimed: a replica that holds every slot of an
// engine in its lease (its calls done, the slots kept for its next ones)
// and units ahead dies without giving them back: the other replica waits
// until the lease expires, then its next batch reaps it and gets the slots.
// The dead lease's units are not refunded (the dead replica may have spent
// them): the engine is never asked past its quota.
func TestDeadReplicasLeaseIsReclaimed(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	f := pooltest.New(t, pooltest.Serve)
	f.Quota, f.Concurrency, f.Delay = 1000, 2, 200*time.Millisecond // the two calls overlap
	conn, err := store.Open(context.Background(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	dying, dtr := replica(t, conn, clk, member("one", f))
	dying.Sched.LeaseIdle = time.Hour
	concurrently(t, 2, func(int) error {
		_, err := dtr.Translate(context.Background(), []string{"ten chars."}, "en", "es")
		return err
	})
	before := status(t, dying, "one")
	if before.InFlight != 2 || before.Leased == 0 {
		t.Fatalf("row %+v: want both slots and units ahead held by the replica's lease", before.Load)
	}
	conn.Close() // the replica dies holding its lease

	live, tr := replica(t, db.Pool, clk, member("one", f))
	live.LocalWait = 100 * time.Millisecond
	_, err = tr.Translate(context.Background(), []string{"ten chars."}, "en", "es")
	if reason, _, ok := fault.WaitOf(err); !ok || reason != fault.WaitRateLimit {
		t.Fatalf("every slot in the dead replica's lease: %v, want a rate_limit wait", err)
	}
	clk.Move(11 * time.Second) // past the lease (10 s)
	live.LocalWait = 0         // from now on a full engine is waited for in place
	concurrently(t, 4, func(int) error {
		_, err := tr.Translate(context.Background(), []string{"ten chars."}, "en", "es")
		return err
	})
	live.Sched.Flush()
	c, s := f.Counters(), status(t, live, "one")
	if s.InFlight != 0 || s.Leased != 0 || c.Served != 6 || c.OverParallel != 0 || c.MaxInFlight > 2 {
		t.Errorf("row %+v, engine %+v: want the dead lease's slots back (6 calls served, never more than 2 at once), nothing held", s.Load, c)
	}
	if lost := before.Leased; s.Used != int64(c.Units)+lost {
		t.Errorf("row used %d: want the %d units served and the dead lease's %d units (not refunded)", s.Used, c.Units, lost)
	}
	noLeaseRows(t, db.Pool, "the dead one reaped, the live one given back")
}

// TestLeasesKeepLimitsAcrossReplicas: 2 replicas × 8 consumers on fast
// engines whose quotas leave room for leases of several calls each: the
// engines are never asked past their quota or concurrency (their own
// counters), the quotas are spent exactly and the rest waits no_quota.
func TestLeasesKeepLimitsAcrossReplicas(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	fakes, members := quotaFakes(t, 2*time.Millisecond, 600, 600, 800)
	for i, f := range fakes {
		f.Concurrency = 4
		members[i].Concurrency = 4
	}
	pa, a := replica(t, db.Pool, clk, members...)
	pb, b := replica(t, db.Pool, clk, members...)
	// 240 calls of ten characters: 2400 characters; the quotas hold 2000.
	if served, waited := spendQuotas(t, 240, a, b); served != 200 || waited != 40 {
		t.Errorf("%d calls served, %d waited no_quota; want 200 and 40", served, waited)
	}
	pa.Sched.Flush()
	pb.Sched.Flush()
	for i, f := range fakes {
		c := f.Counters()
		if c.OverQuota != 0 || c.OverParallel != 0 || c.MaxInFlight > 4 || c.Units != f.Quota {
			t.Errorf("fake-%d saw %+v: want its quota %d served exactly, never more than 4 calls at once", i, c, f.Quota)
		}
		if s := status(t, pa, members[i].Name); s.Used != int64(c.Units) || s.InFlight != 0 || s.Leased != 0 {
			t.Errorf("fake-%d's row %+v: want %d used, nothing in flight or leased", i, s.Load, c.Units)
		}
	}
}

// TestRateLimitOnOneReplicaCoolsTheOther: both replicas hold a lease on the
// preferred engine; it answers one replica's call with a 429: that replica
// moves on at once, and the other stops using the engine within a lease
// term (its next batch reads the cool-down), though its lease still had a
// slot and units for it.
func TestRateLimitOnOneReplicaCoolsTheOther(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	limited, ok := pooltest.New(t, pooltest.Serve), pooltest.New(t, pooltest.Serve)
	limited.RetryAfter = 120
	fallback := member("ok", ok)
	fallback.Fallback = true // serves only when limited cannot
	pa, a := replica(t, db.Pool, clk, member("limited", limited), fallback)
	pb, b := replica(t, db.Pool, clk, member("limited", limited), fallback)
	for _, p := range []*pool.Pool{pa, pb} {
		p.Sched.LeaseIdle = time.Hour
	}
	for _, tr := range []*pool.Translator{a, b} {
		if _, err := tr.Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
			t.Fatal(err)
		}
	}
	if s := status(t, pa, "limited"); limited.Counters().Served != 2 || s.InFlight != 2 || s.Leased == 0 {
		t.Fatalf("limited engine %+v, row %+v: want both replicas served by it, each holding a lease", limited.Counters(), s.Load)
	}
	limited.SetMode(pooltest.RateLimited)
	if _, err := a.Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
		t.Fatal(err)
	}
	if c := limited.Counters(); c.Calls != 3 || ok.Counters().Served != 1 {
		t.Fatalf("limited %+v, ok %+v: want the 429 and the call moved to ok", c, ok.Counters())
	}
	clk.Move(pool.DefaultLeaseTerm) // the bound: b's view of the rows is a lease term old
	for range 3 {
		if _, err := b.Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
			t.Fatal(err)
		}
	}
	if c := limited.Counters(); c.Calls != 3 || ok.Counters().Served != 4 {
		t.Errorf("limited %+v, ok %+v: want the other replica to leave the cooled engine alone", c, ok.Counters())
	}
	pa.Sched.Flush()
	pb.Sched.Flush()
	if s := status(t, pa, "limited"); s.InFlight != 0 || s.Leased != 0 || s.Used != int64(limited.Counters().Units) {
		t.Errorf("limited row %+v: want nothing held after the flushes, used what it served (%d)", s.Load, limited.Counters().Units)
	}
}

// batchCounter is the shared database, counting the batches sent to it
// and the reservations they make.
type batchCounter struct {
	pool.DB
	n, reserved atomic.Int64
}

func (c *batchCounter) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c.n.Add(1)
	for _, q := range b.QueuedQueries {
		if strings.Contains(q.SQL, "INSERT INTO engine_reservations") {
			c.reserved.Add(1)
		}
	}
	return c.DB.SendBatch(ctx, b)
}

// TestSlowEnginesLeaseOutlivesItsCalls: 2 replicas × 8 consumers call an
// engine whose calls take 50 ms, longer than the default LeaseTerm's half
// and than LeaseIdle: the leases, their term and idle time scaled to the
// engine's call time, serve most calls, so that the replicas send far
// fewer batches than calls and reserve few calls in the database (without
// the scaling, half the calls are reserved there).
func TestSlowEnginesLeaseOutlivesItsCalls(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	f := pooltest.New(t, pooltest.Serve)
	f.Delay = 50 * time.Millisecond
	counted := &batchCounter{DB: db.Pool}
	pa, a := replica(t, counted, clk, member("slow", f))
	pb, b := replica(t, counted, clk, member("slow", f))
	const rounds = 10
	start, reservedBefore := counted.n.Load(), counted.reserved.Load()
	concurrently(t, 16, func(i int) error {
		for range rounds {
			if _, err := []*pool.Translator{a, b}[i%2].Translate(context.Background(), []string{"ten chars."}, "en", "es"); err != nil {
				return err
			}
		}
		return nil
	})
	batches, reserved, calls := counted.n.Load()-start, counted.reserved.Load()-reservedBefore, int64(16*rounds)
	t.Logf("%d batches, %d reservations in them for %d calls", batches, reserved, calls)
	if served := f.Counters().Served; served != int(calls) {
		t.Fatalf("engine served %d calls, want %d", served, calls)
	}
	if batches*4 > calls || reserved*4 > calls {
		t.Errorf("%d batches reserving %d calls in the database for %d calls of a 50 ms engine: want the leases to serve most calls (at most one batch and one reservation in the database for 4 calls)", batches, reserved, calls)
	}
	pa.Sched.Flush()
	pb.Sched.Flush()
	noLeaseRows(t, db.Pool, "both replicas flushed")
}

// TestCooledEngineLeftWithinLeaseScaleMax: calls of 400 ms would grow a
// replica's lease term of the engine to 800 ms; LeaseScaleMax bounds it
// (150 ms here). A 429 one replica saw stops the other's use of the engine
// once that one's view of the rows is LeaseScaleMax old, though its lease
// still holds a slot and units for it.
func TestCooledEngineLeftWithinLeaseScaleMax(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	slow, ok := pooltest.New(t, pooltest.Serve), pooltest.New(t, pooltest.Serve)
	slow.Delay, slow.RetryAfter = 400*time.Millisecond, 120
	fallback := member("ok", ok)
	fallback.Fallback = true // serves only when slow cannot
	var ps []*pool.Pool
	var trs []*pool.Translator
	for range 2 {
		p := stepPool(t, db.Pool, clk, "translate", member("slow", slow), fallback)
		p.Sched.LeaseIdle = time.Hour
		tr, err := pool.NewTranslator(p, speech.Config{HTTPTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ps, trs = append(ps, p), append(trs, tr)
	}
	ps[1].Sched.LeaseScaleMax = 150 * time.Millisecond
	for _, tr := range trs {
		if _, err := tr.Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
			t.Fatal(err)
		}
	}
	if s := status(t, ps[0], "slow"); slow.Counters().Served != 2 || s.InFlight != 2 || s.Leased == 0 {
		t.Fatalf("slow engine %+v, row %+v: want both replicas served by it, each holding a lease", slow.Counters(), s.Load)
	}
	slow.SetMode(pooltest.RateLimited)
	if _, err := trs[0].Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
		t.Fatal(err)
	}
	if c := slow.Counters(); c.Calls != 3 || ok.Counters().Served != 1 {
		t.Fatalf("slow %+v, ok %+v: want the 429 and the call moved to ok", c, ok.Counters())
	}
	clk.Move(ps[1].Sched.LeaseScaleMax) // the bound: the other replica's view is that old
	for range 3 {
		if _, err := trs[1].Translate(context.Background(), []string{"hello"}, "en", "es"); err != nil {
			t.Fatal(err)
		}
	}
	if c := slow.Counters(); c.Calls != 3 || ok.Counters().Served != 4 {
		t.Errorf("slow %+v, ok %+v: want the other replica to leave the cooled engine alone", c, ok.Counters())
	}
	for _, p := range ps {
		p.Sched.Flush()
	}
	if s := status(t, ps[0], "slow"); s.InFlight != 0 || s.Leased != 0 || s.Used != int64(slow.Counters().Units) {
		t.Errorf("slow row %+v: want nothing held after the flushes, used what it served (%d)", s.Load, slow.Counters().Units)
	}
}
