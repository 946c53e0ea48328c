package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A replica's reservations and releases that need the database go to
// Postgres in batches: one round trip and one transaction for all the calls
// of the replica that want one at that moment. The batch locks the step's
// rows first (in name order, so that two replicas' batches queue behind
// each other instead of deadlocking), applies the releases, gives back
// what the replica's leases hold unused (lease.go), then makes the
// reservations one after the other, each seeing the ones before, and reads
// the rows for the replica's view. While one batch is on its way the next
// calls queue for the next one. Most calls need no batch: they are served
// from the replica's leases and end there (lease.go).

// op is one reservation or release waiting for its batch.
type op struct {
	release bool
	// flush: nothing to do; its batch follows every op queued before it
	// and gives back what the leases hold unused (of engines only, when
	// set: idle leases). refresh: nothing to do either; its batch reads the
	// rows anew (lease.go).
	flush, refresh bool
	engines        []string
	// A reservation: the candidates, the units, the horizon; what it got.
	cands   []string
	units   int64
	horizon time.Duration
	ok      bool
	// res is what a reservation got and what a release ends; extra the
	// units it leased ahead.
	res    Reservation
	extra  int64
	result result
	err    error
	done   chan struct{} // closed when the op's batch ended (nil: nobody waits)
}

// batcher queues a replica's ops; one goroutine at a time sends them.
type batcher struct {
	mu      sync.Mutex
	queue   []*op
	sending bool
	armed   bool // a timer sends the releases nobody waits for
}

// flushTimeout bounds one batch's round trip (a batch serves many calls,
// none of whose contexts it can take).
const flushTimeout = 30 * time.Second

// batchTries is how often a batch is sent when its lock wait times out.
const batchTries = 5

// batchLockWait bounds how long a batch waits for the step's rows. It is
// below Postgres' deadlock_timeout (1 s by default): should a statement
// of someone else's lock two of the rows in another order while a batch
// takes them, the batch gives up first (and is sent again) rather than
// the other statement being chosen to fail.
const batchLockWait = 500 * time.Millisecond

// releaseDelay is how long an op that nobody waits for may wait for a
// batch to go with before it is sent on its own.
const releaseDelay = 10 * time.Millisecond

// submit queues o for the next batch and waits for it when wait. When no
// batch is on its way, a caller that waits sends it itself (sparing a
// goroutine's hand-over) and leaves what queued meanwhile to a sender of
// its own; an op nobody waits for (the give-back of an idle replica's
// leases) goes with the next batch, at the latest after releaseDelay.
func (s *Schedule) submit(o *op, wait bool) {
	if wait {
		o.done = make(chan struct{})
	}
	s.batch.mu.Lock()
	s.batch.queue = append(s.batch.queue, o)
	start := wait && !s.batch.sending
	s.batch.sending = s.batch.sending || start
	if !wait {
		s.armLocked()
	}
	s.batch.mu.Unlock()
	if start {
		s.sendOnce(false)
		go s.send(false)
	}
	if wait {
		<-o.done
	}
}

// send sends the queued ops in batches until none is left (or, unless
// force, none that a caller waits for), unless another sender runs.
func (s *Schedule) send(force bool) {
	if force {
		s.batch.mu.Lock()
		busy := s.batch.sending
		s.batch.sending = true
		s.batch.mu.Unlock()
		if busy {
			return // the running sender takes the queue
		}
	}
	for s.sendOnce(force) {
	}
}

// armLocked has a timer send the queue after releaseDelay, unless one
// will already (the caller holds the batcher's lock).
func (s *Schedule) armLocked() {
	if s.batch.armed {
		return
	}
	s.batch.armed = true
	time.AfterFunc(releaseDelay, func() {
		s.batch.mu.Lock()
		s.batch.armed = false
		s.batch.mu.Unlock()
		s.send(true)
	})
}

// sendOnce sends the queued ops as one batch; false when there were none
// (or, unless force, none that a caller waits for): the replica has no
// sender any more then.
func (s *Schedule) sendOnce(force bool) bool {
	s.batch.mu.Lock()
	ops := s.batch.queue
	if !force && !slices.ContainsFunc(ops, func(o *op) bool { return o.done != nil }) {
		ops = nil
	}
	if len(ops) == 0 {
		s.batch.sending = false
		if len(s.batch.queue) > 0 {
			s.armLocked()
		}
		s.batch.mu.Unlock()
		return false
	}
	s.batch.queue = nil
	s.batch.mu.Unlock()
	err := s.flushTries(ops)
	for _, o := range ops {
		if err != nil {
			o.ok, o.err = false, err
		}
		if o.done != nil {
			close(o.done)
		}
	}
	return true
}

// flushTries sends ops as one batch, again when it could not lock the
// step's rows in time (the whole transaction was rolled back), with what
// the replica's leases give back; when the server refused it, the leases
// hold that again.
func (s *Schedule) flushTries(ops []*op) error {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	all, reserving, drop := false, false, map[string]bool{}
	for _, o := range ops {
		all = all || (o.flush && o.engines == nil)
		reserving = reserving || o.reserves()
		if o.release {
			drop[o.res.Engine] = true
		}
		for _, e := range o.engines {
			drop[e] = true
		}
	}
	st := s.settle(all, reserving, drop)
	var err error
	for range batchTries {
		err = s.flush(ctx, ops, st)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "55P03" && pgErr.Code != "40P01") {
			break
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// The server refused the batch: its transaction was rolled back.
		// On any other error (a connection lost) it may have committed:
		// the leases keep less than the rows count for them, never more.
		s.restore(st)
	} else if err != nil {
		s.restore(&settlement{})
	}
	return err
}

// flush sends ops in one transaction: lock the step's rows, reap the
// leases and reservations of dead workers (once a second), the releases,
// what the leases give back (st), the reservations, and read the rows.
func (s *Schedule) flush(ctx context.Context, ops []*op, st *settlement) error {
	now := s.now()
	lease := s.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	owner := s.ownerID()
	b := &pgx.Batch{}
	// The schedule is advisory bookkeeping: a commit lost in a crash loses
	// a few calls' counts, not a step's outcome, so the batch commits
	// without waiting for the WAL flush.
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true), set_config('lock_timeout', $1, true)`,
		fmt.Sprintf("%dms", batchLockWait.Milliseconds()))
	b.Queue(`SELECT name FROM engine_schedule WHERE step = $1 ORDER BY name FOR UPDATE`, s.Step)
	if last := s.reaped.Load(); now.UnixNano()-last > int64(reapEvery) && s.reaped.CompareAndSwap(last, now.UnixNano()) {
		b.Queue(reapSQL, s.Step, now)
	}
	for _, o := range ops {
		if o.release {
			s.queueRelease(b, o, now)
		}
	}
	kept := map[string]bool{}
	if len(st.names) > 0 {
		b.Queue(settleSQL, s.Step, owner, st.names, st.slots, st.units, st.calls, st.wins, now.Add(lease), now, st.left).
			Query(func(rows pgx.Rows) error {
				names, err := pgx.CollectRows(rows, pgx.RowTo[string])
				for _, n := range names {
					kept[n] = true
				}
				return err
			})
	}
	window := s.Cfg.WindowStart(now)
	for _, o := range ops {
		if o.reserves() {
			ahead := s.leaseAhead(o.cands)
			o.res, o.ok, o.extra = Reservation{Units: o.units}, false, 0
			b.Queue(reserveSQL, s.Step, o.cands, now, now.Add(o.horizon), window, o.units, now.Add(lease), owner, ahead, leaseShare).
				QueryRow(o.scan)
		}
	}
	b.Queue(`DELETE FROM engine_reservations WHERE step = $1 AND owner = $2 AND slots <= 0 AND units <= 0`, s.Step, owner)
	var rows []viewRow
	b.Queue(viewSQL, s.Step).Query(func(r pgx.Rows) error {
		var err error
		rows, err = pgx.CollectRows(r, func(row pgx.CollectableRow) (viewRow, error) {
			var v viewRow
			err := row.Scan(&v.name, &v.v.fallback, &v.v.weight, &v.v.rpm, &v.v.conc, &v.v.quota, &v.v.window, &v.v.used,
				&v.v.inFlight, &v.v.avail, &v.v.failures)
			return v, err
		})
		return err
	})
	if err := s.DB.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	s.apply(st, kept, ops, rows, now, window)
	return nil
}

// viewSQL reads the step's rows for the replica's view ($1 step).
const viewSQL = `SELECT name, fallback, weight, rpm, concurrency, daily_quota, window_start, used, in_flight,
	greatest(next_available_at, cooled_until, breaker_until), failures FROM engine_schedule WHERE step = $1`

// reserves: o is a reservation.
func (o *op) reserves() bool { return !o.release && !o.flush && !o.refresh }

// scan reads a reservation's row; none: no engine can serve it now.
func (o *op) scan(row pgx.Row) error {
	err := row.Scan(&o.res.ID, &o.res.Engine, &o.res.At, &o.res.failures, &o.extra)
	o.ok = err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// settleSQL gives back what the replica's leases hold unused and renews
// their expiry ($1 step, $2 owner, $3 engines, $4 free slots, $5 units not
// spent, $6 calls served, $7 the units' windows, $8 expiry, $9 now, $10
// the units the leases keep); it
// returns the engines whose lease rows are still there (the others were
// reaped: their slots are already given back, their units not refunded).
// Units of a window that has ended are not taken off the new one.
const settleSQL = `WITH s AS (SELECT * FROM unnest($3::text[], $4::int[], $5::bigint[], $6::bigint[], $7::timestamptz[],
	                $10::bigint[]) AS s(name, slots, units, calls, win, keep)),
	l AS (UPDATE engine_reservations r SET slots = r.slots - s.slots, units = s.keep, expires_at = $8
	        FROM s WHERE r.step = $1 AND r.owner = $2 AND r.name = s.name RETURNING r.name),
	u AS (UPDATE engine_schedule e SET in_flight = greatest(e.in_flight - s.slots, 0), calls = e.calls + s.calls, updated_at = $9,
	             used = CASE WHEN e.window_start <= s.win THEN greatest(e.used - s.units, 0) ELSE e.used END
	        FROM s JOIN l ON l.name = s.name WHERE e.step = $1 AND e.name = s.name)
	SELECT name FROM l`

// Flush returns once what the replica's leases hold unused has been given
// back (or the batch failed). A worker that stops calls it so that its
// engine slots and units are free at once, not when its leases expire.
func (s *Schedule) Flush() { s.submit(&op{flush: true}, true) }
