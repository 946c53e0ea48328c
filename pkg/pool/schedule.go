package pool

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the schedule needs of Postgres (a *pgxpool.Pool).
type DB interface {
	store.Querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Schedule is a step's rows of the shared schedule (engine_schedule).
type Schedule struct {
	DB   DB
	Step string
	Cfg  Config
	// Now is the clock (time.Now when nil); tests move it.
	Now func() time.Time
	// Lease is how long a reservation lives if its call never reports
	// back (its worker died); DefaultLease when zero.
	Lease time.Duration

	reaped atomic.Int64 // when this replica last reaped, unix ns
}

// reapEvery is how often a replica frees the reservations of dead workers.
const reapEvery = time.Second

// DefaultLease bounds a reservation whose worker died.
const DefaultLease = 5 * time.Minute

func (s *Schedule) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Sync writes the configured limits of each member into its row (creating
// it), so that every replica and the console see them.
func (s *Schedule) Sync(ctx context.Context) error {
	b := &pgx.Batch{}
	for _, m := range s.Cfg.Engines {
		b.Queue(`INSERT INTO engine_schedule (step, name, kind, weight, rpm, concurrency, daily_quota, fallback)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (step, name) DO UPDATE SET kind = EXCLUDED.kind, weight = EXCLUDED.weight, rpm = EXCLUDED.rpm,
			    concurrency = EXCLUDED.concurrency, daily_quota = EXCLUDED.daily_quota, fallback = EXCLUDED.fallback`,
			s.Step, m.Name, m.Kind, max(m.Weight, 1), m.RPM, m.Concurrency, m.DailyQuota, m.Fallback)
	}
	if err := s.DB.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("sync %s pool: %w", s.Step, err)
	}
	return nil
}

// Reservation is one call's hold on an engine.
type Reservation struct {
	ID     int64
	Engine string
	Units  int64
	// At is when the call may start (the engine's next slot; now or soon).
	At time.Time
}

// reapSQL frees the reservations of dead workers ($1 step, $2 now).
const reapSQL = `WITH gone AS (DELETE FROM engine_reservations WHERE step = $1 AND expires_at < $2 RETURNING name)
	UPDATE engine_schedule e SET in_flight = greatest(e.in_flight - g.n, 0)
	  FROM (SELECT name, count(*) AS n FROM gone GROUP BY name) g WHERE e.step = $1 AND e.name = g.name`

// usedSQL is an engine's use in the window starting at $5.
const usedSQL = `(CASE WHEN e.window_start < $5 THEN 0 ELSE e.used END)`

// reserveSQL reserves the best engine ($1 step, $2 candidates, $3 now, $4
// the latest acceptable slot, $5 the window start, $6 units, $7 expiry),
// skipping the rows other calls hold; reserveWaitSQL waits for them.
// The schedule is advisory bookkeeping: a commit lost in a crash loses one
// call's count, not a step's outcome, so its transactions commit without
// waiting for the WAL flush (synchronous_commit off, set by the statement
// itself: no round trip of its own), which keeps the rows locked for less
// time.
const (
	reserveSQL     = reserveSelect + ` SKIP LOCKED)` + reserveRest
	reserveWaitSQL = reserveSelect + `)` + reserveRest
)

const reserveSelect = `WITH c AS (
    SELECT e.step, e.name, greatest(e.next_available_at, e.cooled_until, e.breaker_until, $3) AS at
      FROM engine_schedule e, (SELECT set_config('synchronous_commit', 'off', true)) sc
     WHERE e.step = $1 AND e.name = ANY($2::text[])
       AND greatest(e.next_available_at, e.cooled_until, e.breaker_until) <= $4
       AND (e.daily_quota = 0 OR ` + usedSQL + ` + $6 <= e.daily_quota)
       AND (e.concurrency = 0 OR e.in_flight < e.concurrency)
     ORDER BY e.fallback, greatest(e.next_available_at, e.cooled_until, e.breaker_until, $3),
              ` + usedSQL + `::float8 / e.weight, e.name
     LIMIT 1 FOR UPDATE OF e`

const reserveRest = `, u AS (
    UPDATE engine_schedule e SET used = ` + usedSQL + ` + $6, window_start = greatest(e.window_start, $5),
           in_flight = e.in_flight + 1, calls = e.calls + 1, updated_at = $3,
           next_available_at = CASE WHEN e.rpm > 0 THEN c.at + (60000.0 / e.rpm) * interval '1 millisecond'
                                    ELSE e.next_available_at END
      FROM c WHERE e.step = c.step AND e.name = c.name
    RETURNING e.step, e.name
), r AS (
    INSERT INTO engine_reservations (step, name, units, expires_at) SELECT step, name, $6, $7 FROM u RETURNING id, name
)
SELECT r.id, r.name, c.at FROM r JOIN c ON c.name = r.name`

// reserve holds one of candidates for a call of units, whose slot is no
// later than horizon; ok is false when none can serve now. It skips the
// engines other calls hold right now, unless wait: then it waits for them
// (briefly: lockWait), to be used when skipping found none.
func (s *Schedule) reserve(ctx context.Context, candidates []string, units int64, horizon time.Duration, wait bool) (Reservation, bool, error) {
	now := s.now()
	lease := s.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	res := Reservation{Units: units}
	b := &pgx.Batch{}
	query := reserveSQL
	if wait {
		// Only the one row is locked in this transaction, and not for long.
		b.Queue(`SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", lockWait.Milliseconds()))
		query = reserveWaitSQL
	} else if last := s.reaped.Load(); now.UnixNano()-last > int64(reapEvery) && s.reaped.CompareAndSwap(last, now.UnixNano()) {
		b.Queue(reapSQL, s.Step, now)
	}
	b.Queue(query, s.Step, candidates, now, now.Add(horizon), s.Cfg.WindowStart(now), units, now.Add(lease)).
		QueryRow(func(row pgx.Row) error { return row.Scan(&res.ID, &res.Engine, &res.At) })
	err := s.DB.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return res, false, nil
	case wait && errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01"):
		return res, false, nil // the lock was not free in time (or a deadlock): as if taken
	case err != nil:
		return res, false, fmt.Errorf("reserve a %s engine: %w", s.Step, err)
	}
	return res, true, nil
}

// lockWait bounds how long a reservation waits for an engine's row.
const lockWait = 250 * time.Millisecond

// result is how a call on a reserved engine ended, for the schedule.
type result struct {
	ok bool
	// refund gives the reserved units back (the engine did no work).
	refund bool
	// coolUntil cools the engine down (a 429, a spent quota).
	coolUntil time.Time
	// failure counts a server error towards the breaker.
	failure bool
	// neutral only frees the reservation (the step cut the call short).
	neutral bool
	errText string
}

// Breaker settings: an engine's breaker opens after BreakerFailures
// server errors in a row, for BreakerOpen.
const (
	BreakerFailures = 3
	BreakerOpen     = 30 * time.Second
)

// release ends res with r.
func (s *Schedule) release(ctx context.Context, res Reservation, r result) error {
	now := s.now()
	var cool, breaker *time.Time
	if !r.coolUntil.IsZero() {
		cool = &r.coolUntil
	}
	if b := now.Add(BreakerOpen); r.failure {
		breaker = &b
	}
	refund := int64(0)
	if r.refund {
		refund = res.Units
	}
	_, err := s.DB.Exec(ctx, `WITH d AS (DELETE FROM engine_reservations WHERE id = $3 RETURNING 1)
		UPDATE engine_schedule e SET in_flight = greatest(e.in_flight - (SELECT count(*) FROM d), 0),
		       used = greatest(e.used - $4, 0), updated_at = $5,
		       cooled_until = greatest(e.cooled_until, coalesce($6::timestamptz, 'epoch')),
		       failures = CASE WHEN $7 THEN 0 WHEN $8 THEN e.failures + 1 ELSE e.failures END,
		       errors = e.errors + CASE WHEN $7 OR $12 THEN 0 ELSE 1 END,
		       breaker_until = CASE WHEN $7 THEN 'epoch'
		                            WHEN $8 AND e.failures + 1 >= $10 THEN $9::timestamptz ELSE e.breaker_until END,
		       last_error = CASE WHEN $7 OR $12 THEN e.last_error ELSE $11 END,
		       last_error_at = CASE WHEN $7 OR $12 THEN e.last_error_at ELSE $5 END
		  FROM (SELECT set_config('synchronous_commit', 'off', true)) sc
		 WHERE e.step = $1 AND e.name = $2`,
		s.Step, res.Engine, res.ID, refund, now, cool, r.ok, r.failure, breaker, BreakerFailures, r.errText, r.neutral)
	if err != nil {
		return fmt.Errorf("release %s engine %s: %w", s.Step, res.Engine, err)
	}
	return nil
}
