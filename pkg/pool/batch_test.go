package pool_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestTwoReplicasSpendTheQuotaExactly: 2 replicas × 8 consumers make more
// calls than three engines' quotas allow, through the replicas' batches:
// the engines serve exactly their quotas (no call over a quota or over a
// concurrency, by the fakes' own counters), every other call waits
// no_quota, and the schedule counts what the engines counted, with
// nothing left in flight once the replicas' releases are written.
func TestTwoReplicasSpendTheQuotaExactly(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	fakes, members := quotaFakes(t, 5*time.Millisecond, 400, 400, 600)
	pa, a := replica(t, db.Pool, clk, members...)
	pb, b := replica(t, db.Pool, clk, members...)
	// 170 calls of ten characters: 1700 characters; the quotas hold 1400.
	if served, waited := spendQuotas(t, 170, a, b); served != 140 || waited != 30 {
		t.Errorf("%d calls served, %d waited no_quota; want 140 and 30", served, waited)
	}
	pa.Sched.Flush()
	pb.Sched.Flush()
	for i, f := range fakes {
		c, s := f.Counters(), status(t, pa, fmt.Sprintf("fake-%d", i))
		if c.OverQuota != 0 || c.OverParallel != 0 || c.MaxInFlight > f.Concurrency || c.Units != f.Quota {
			t.Errorf("fake-%d saw %+v: want its quota %d served exactly, never over its concurrency %d", i, c, f.Quota, f.Concurrency)
		}
		if s.Used != int64(c.Units) || s.InFlight != 0 {
			t.Errorf("fake-%d's row %+v: want %d used (what it served) and nothing in flight", i, s, c.Units)
		}
	}
	var left int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM engine_reservations`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d reservations left (%v), want none", left, err)
	}
}

// spendQuotas makes calls of ten characters on 16 consumers, consumer i
// on trs[i%2], and counts those served and those that waited no_quota;
// any other error fails the test.
func spendQuotas(t *testing.T, calls int64, trs ...*pool.Translator) (served, waited int64) {
	t.Helper()
	var next, ok, spent atomic.Int64
	concurrently(t, 16, func(i int) error {
		for next.Add(1) <= calls {
			_, err := trs[i%2].Translate(context.Background(), []string{"ten chars."}, "en", "es")
			reason, _, waiting := fault.WaitOf(err)
			switch {
			case err == nil:
				ok.Add(1)
			case waiting && reason == fault.WaitNoQuota:
				spent.Add(1)
			default:
				return err
			}
		}
		return nil
	})
	return ok.Load(), spent.Load()
}

// TestDyingReplicasSlotsComeBack: a replica holding every concurrency slot
// of an engine dies (its connections close with its calls in flight, so
// their releases never arrive): the other replica waits rate_limit until
// the dead calls' reservations expire, then gets the slots back; its own
// calls never exceed the engine's concurrency.
func TestDyingReplicasSlotsComeBack(t *testing.T) {
	db := testenv.Postgres(t)
	clk := &clock{}
	m := pool.Member{Name: "one", Kind: "apy", BaseURL: "http://unused", Limits: pool.Limits{Concurrency: 2}}
	conn, err := store.Open(context.Background(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	dying := stepPool(t, conn, clk, "translate", m)
	live := stepPool(t, db.Pool, clk, "translate", m)
	live.LocalWait = 100 * time.Millisecond
	unblock := make(chan struct{})
	var started, ended sync.WaitGroup
	for range 2 {
		started.Add(1)
		ended.Go(func() {
			_ = dying.Do(context.Background(), 1, func(context.Context, string) error { started.Done(); <-unblock; return nil })
		})
	}
	started.Wait()
	conn.Close() // the replica dies with both calls in flight
	defer func() { close(unblock); ended.Wait() }()
	var inFlight, most atomic.Int64
	call := func(context.Context, string) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	err = live.Do(context.Background(), 1, call)
	if reason, _, ok := fault.WaitOf(err); !ok || reason != fault.WaitRateLimit {
		t.Fatalf("every slot held by the dead replica: %v, want a rate_limit wait", err)
	}
	clk.Move(11 * time.Second) // past the dead calls' lease (10 s)
	live.LocalWait = 0         // from now on a full engine is waited for in place
	concurrently(t, 8, func(int) error { return live.Do(context.Background(), 1, call) })
	live.Sched.Flush()
	if s := status(t, live, "one"); s.InFlight != 0 || most.Load() > 2 {
		t.Errorf("row %+v, %d calls at once: want the dead calls' slots back, never more than 2 at once", s, most.Load())
	}
}
