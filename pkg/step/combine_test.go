package step

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// held makes the next round trips of c wait behind one that blocks on an
// advisory lock the test holds; the returned func lets that one go. Every
// round trip started in between goes in one batch.
func held(t *testing.T, ctx context.Context, db *testenv.Database, c *combiner) (release func(), wait func()) {
	t.Helper()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	// Whatever ends the test, the lock's connection goes back to the pool
	// (else the database's cleanup waits for it forever).
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	blocked := make(chan error, 1)
	go func() {
		blocked <- c.do(ctx, "", func(b *pgx.Batch) { b.Queue(`SELECT pg_advisory_xact_lock(4242)`) })
	}()
	// The blocker is in flight once Postgres has it waiting for the lock.
	// (The combiner's own counters cannot tell: the goroutine that ended
	// the previous batch may still hold its place in flight, with nothing
	// waiting, before the blocker has even arrived.)
	testenv.EventuallyWithin(t, 30*time.Second, "the blocker to wait for its lock", func() bool {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return n == 1 && c.flight == 1 && len(c.waiting) == 0
	})
	return func() {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}, func() {
			if err := <-blocked; err != nil {
				t.Fatal(err)
			}
		}
}

// TestCombinerMergesRoundTripsEachAllOrNothing: claims and commits that
// arrive while a batch is in flight go to Postgres together, and one
// delivery's failure in a merged batch stays its own: the others commit,
// it gets its error (a lost lease), as if each had gone alone. Claims of one
// part in one batch still leave at most one running attempt.
func TestCombinerMergesRoundTripsEachAllOrNothing(t *testing.T) {
	db := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCombiner(db.Pool, 128, 1)
	task := uuid.New()
	const n = 40

	// n claims of n parts, and n claims of one part (attempts 1..n), in
	// one batch.
	release, wait := held(t, ctx, db, c)
	claims := make([]attempt.Lease, 2*n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		k := attempt.Key{TaskID: task, Step: "asr", Part: fmt.Sprintf("p%d", i), Attempt: 1}
		if i >= n {
			k.Part, k.Attempt = "same", i-n+1
		}
		wg.Go(func() {
			errs[i] = c.do(ctx, k.Part, func(b *pgx.Batch) { attempt.QueueClaim(b, k, "w", time.Minute, "", nil, time.Time{}, &claims[i]) })
		})
	}
	testenv.EventuallyWithin(t, 30*time.Second, "every claim to wait", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.waiting) == 2*n })
	release()
	wait()
	wg.Wait()
	if got := c.merged.Load(); got != 1 {
		t.Fatalf("claims went in %d merged batches, want 1", got)
	}
	same := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if i < n && claims[i].Outcome != attempt.Claimed {
			t.Fatalf("claim %d: %s, want claimed", i, claims[i].Outcome)
		}
		if i >= n && claims[i].Outcome == attempt.Claimed {
			same++
		}
	}
	if same != 1 {
		t.Fatalf("%d attempts of one part claimed in one batch, want 1", same)
	}

	// n commits, one of them by a worker that does not hold its attempt.
	release, wait = held(t, ctx, db, c)
	for i := range n {
		worker := "w"
		if i == 7 {
			worker = "intruder"
		}
		wg.Go(func() {
			errs[i] = c.do(ctx, fmt.Sprint(n-i), func(b *pgx.Batch) {
				s := attempt.Succeed(claims[i].StepID, worker)
				b.Queue(s.SQL, s.Args...)
			})
		})
	}
	testenv.EventuallyWithin(t, 30*time.Second, "every commit to wait", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.waiting) == n })
	release()
	wait()
	wg.Wait()
	if got := c.merged.Load(); got != 2 {
		t.Fatalf("commits went in %d merged batches, want 1", got-1)
	}
	for i := range n {
		err := attempt.MapError(errs[i])
		if i == 7 {
			if !errors.Is(err, attempt.ErrLeaseLost) {
				t.Fatalf("intruder's commit: %v, want ErrLeaseLost", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	var succeeded int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND status = 'succeeded'`, task).Scan(&succeeded); err != nil {
		t.Fatal(err)
	}
	if succeeded != n-1 {
		t.Fatalf("%d attempts succeeded, want %d", succeeded, n-1)
	}
}
