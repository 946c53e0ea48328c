package pool

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
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
	// Lease is how long the replica's lease of an engine (lease.go) lives
	// after its last batch if the replica dies; DefaultLease when zero.
	Lease time.Duration
	// LeaseTerm is how long the replica serves calls from its leases after
	// its last batch; DefaultLeaseTerm when zero. It grows for a slow
	// engine (LeaseScaleMax).
	LeaseTerm time.Duration
	// LeaseIdle is how long the replica may take nothing from its lease of
	// an engine before it gives back what it holds unused;
	// DefaultLeaseIdle when zero. It grows for a slow engine
	// (LeaseScaleMax).
	LeaseIdle time.Duration
	// LeaseScaleMax bounds how far an engine's LeaseTerm and LeaseIdle grow
	// with its recent call time (lease.go); DefaultLeaseScaleMax when zero.
	LeaseScaleMax time.Duration

	reaped atomic.Int64 // when this replica last reaped, unix ns
	batch  batcher      // the reservations and releases waiting for the next batch
	lease  leases       // the replica's leases and view of the rows
}

// reapEvery is how often a replica frees the reservations of dead workers.
const reapEvery = time.Second

// DefaultLease bounds a lease whose worker died.
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
	// In name order, as a batch locks them (batch.go): no deadlock.
	members := slices.SortedFunc(slices.Values(s.Cfg.Engines), func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range members {
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

// Reservation is one call's hold on an engine: a slot and units of the
// replica's lease (lease.go).
type Reservation struct {
	// ID is the lease row's when the call was reserved in a batch.
	ID     int64
	Engine string
	Units  int64
	// At is when the call may start (the engine's next slot; now or soon).
	At time.Time
	// failures are the engine's server errors in a row when reserved.
	failures int
	// gen is the lease's generation the call took its slot of.
	gen int
	// start is when the call was reserved (wall clock; zero: never).
	start time.Time
}

// reapSQL frees the slots of dead workers' leases (and reservations) ($1
// step, $2 now); their units are not refunded (they may have been spent).
const reapSQL = `WITH gone AS (DELETE FROM engine_reservations WHERE step = $1 AND expires_at < $2 RETURNING name, slots)
	UPDATE engine_schedule e SET in_flight = greatest(e.in_flight - g.n, 0)
	  FROM (SELECT name, sum(slots) AS n FROM gone GROUP BY name) g WHERE e.step = $1 AND e.name = g.name`

// usedSQL is an engine's use in the window starting at $5.
const usedSQL = `(CASE WHEN e.window_start < $5 THEN 0 ELSE e.used END)`

// reserveSQL reserves the best engine for a call ($1 step, $2 candidates,
// $3 now, $4 the latest acceptable slot, $5 the window start, $6 units, $7
// expiry, $8 the replica, $9 the calls' worth to lease ahead, $10
// leaseShare): a slot and the call's units, and units leased ahead (none
// for an engine with a rate: its calls go through the database), join the
// replica's lease of the engine. It runs in a replica's batch (batch.go),
// which holds the step's rows already: FOR UPDATE takes no lock of its own
// then.
const reserveSQL = `WITH c AS (
    SELECT e.step, e.name, greatest(e.next_available_at, e.cooled_until, e.breaker_until, $3) AS at,
           $6 * CASE WHEN e.rpm > 0 THEN 0 WHEN e.daily_quota = 0 THEN $9::bigint
                     ELSE least($9::bigint, (e.daily_quota - ` + usedSQL + ` - $6) / greatest($6 * $10::bigint, 1)) END AS extra
      FROM engine_schedule e
     WHERE e.step = $1 AND e.name = ANY($2::text[])
       AND greatest(e.next_available_at, e.cooled_until, e.breaker_until) <= $4
       AND (e.daily_quota = 0 OR ` + usedSQL + ` + $6 <= e.daily_quota)
       AND (e.concurrency = 0 OR e.in_flight < e.concurrency)
     ORDER BY e.fallback, greatest(e.next_available_at, e.cooled_until, e.breaker_until, $3),
              ` + usedSQL + `::float8 / e.weight, e.name
     LIMIT 1 FOR UPDATE OF e
), u AS (
    UPDATE engine_schedule e SET used = ` + usedSQL + ` + $6 + c.extra, window_start = greatest(e.window_start, $5),
           in_flight = e.in_flight + 1, calls = e.calls + 1, updated_at = $3,
           next_available_at = CASE WHEN e.rpm > 0 THEN c.at + (60000.0 / e.rpm) * interval '1 millisecond'
                                    ELSE e.next_available_at END
      FROM c WHERE e.step = c.step AND e.name = c.name
    RETURNING e.step, e.name, e.failures
), r AS (
    INSERT INTO engine_reservations AS r (step, name, units, expires_at, owner, slots)
    SELECT u.step, u.name, c.extra, $7, $8, 1 FROM u JOIN c ON c.name = u.name
    ON CONFLICT (step, name, owner) WHERE owner <> ''
    DO UPDATE SET slots = r.slots + 1, units = r.units + EXCLUDED.units, expires_at = EXCLUDED.expires_at
    RETURNING id, name
)
SELECT r.id, r.name, c.at, u.failures, c.extra FROM r JOIN c ON c.name = r.name JOIN u ON u.name = r.name`

// reserve holds one of candidates for a call of units, whose slot is no
// later than horizon; ok is false when none can serve now. The call is
// served from the replica's leases when they can (lease.go), else it goes
// with the replica's next batch.
func (s *Schedule) reserve(candidates []string, units int64, horizon time.Duration) (Reservation, bool, error) {
	if res, ok := s.takeLocal(candidates, units); ok {
		return res, true, nil
	}
	o := &op{cands: candidates, units: units, horizon: horizon}
	s.submit(o, true)
	if o.err != nil {
		return o.res, false, fmt.Errorf("reserve a %s engine: %w", s.Step, o.err)
	}
	return o.res, o.ok, nil
}

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

// release ends res with r. Its slot (and its units, when refunded) go
// back to the replica's lease. A call that ended well on an engine without
// errors in a row, or was cut short, changes nothing else (most calls);
// any other waits until its batch wrote it, so that the next call sees the
// cool-down or the breaker.
func (s *Schedule) release(res Reservation, r result) error {
	s.releaseLocal(res, r)
	if r.neutral || (r.ok && res.failures == 0) {
		return nil
	}
	o := &op{release: true, res: res, result: r}
	s.submit(o, true)
	if o.err != nil {
		return fmt.Errorf("release %s engine %s: %w", s.Step, res.Engine, o.err)
	}
	return nil
}

// releaseSQL records how a call ended ($1 step, $2 engine, $3 now, $4
// cool-down, $5 ok, $6 failure, $7 breaker's end, $8 BreakerFailures, $9
// error text); its slot and units went back to the replica's lease.
const releaseSQL = `UPDATE engine_schedule e SET updated_at = $3,
		       cooled_until = greatest(e.cooled_until, coalesce($4::timestamptz, 'epoch')),
		       failures = CASE WHEN $5 THEN 0 WHEN $6 THEN e.failures + 1 ELSE e.failures END,
		       errors = e.errors + CASE WHEN $5 THEN 0 ELSE 1 END,
		       breaker_until = CASE WHEN $5 THEN 'epoch'
		                            WHEN $6 AND e.failures + 1 >= $8 THEN $7::timestamptz ELSE e.breaker_until END,
		       last_error = CASE WHEN $5 THEN e.last_error ELSE $9 END,
		       last_error_at = CASE WHEN $5 THEN e.last_error_at ELSE $3 END
		 WHERE e.step = $1 AND e.name = $2`

// queueRelease adds o's release to b, as seen at now.
func (s *Schedule) queueRelease(b *pgx.Batch, o *op, now time.Time) {
	r := o.result
	var cool, breaker *time.Time
	if !r.coolUntil.IsZero() {
		cool = &r.coolUntil
	}
	if t := now.Add(BreakerOpen); r.failure {
		breaker = &t
	}
	b.Queue(releaseSQL, s.Step, o.res.Engine, now, cool, r.ok, r.failure, breaker, BreakerFailures, r.errText)
}
