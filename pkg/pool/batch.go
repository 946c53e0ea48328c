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

// A replica's reservations and releases go to Postgres in batches: one
// round trip and one transaction for all the calls of the replica that
// want one at that moment. The batch locks the step's rows first (in name
// order, so that two replicas' batches queue behind each other instead of
// deadlocking), applies the releases, then makes the reservations one
// after the other, each seeing the ones before. While one batch is on its
// way the next calls queue for the next one. So 16 callers contend for
// the rows as two replicas do, not as 16 transactions, and every call
// still has its own reservation (its own expiry) and sees the schedule as
// it is: no quota, slot or cool-down is held by a replica for later.

// op is one reservation or release waiting for its batch.
type op struct {
	release bool
	// flush: nothing to do; its batch follows every op queued before it.
	flush bool
	// A reservation: the candidates, the units, the horizon; what it got.
	cands   []string
	units   int64
	horizon time.Duration
	ok      bool
	// res is what a reservation got and what a release ends.
	res    Reservation
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

// releaseDelay is how long a release that nobody waits for may wait for
// a batch to go with (a reservation's, usually that of the consumer's next
// call) before it is sent on its own.
const releaseDelay = 10 * time.Millisecond

// submit queues o for the next batch and waits for it when wait. When no
// batch is on its way, a caller that waits sends it itself (sparing a
// goroutine's hand-over) and leaves what queued meanwhile to a sender of
// its own; an op nobody waits for (a clean release) goes with the next
// batch, at the latest after releaseDelay.
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
// step's rows in time (the whole transaction was rolled back).
func (s *Schedule) flushTries(ops []*op) error {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	var err error
	for range batchTries {
		err = s.flush(ctx, ops)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "55P03" && pgErr.Code != "40P01") {
			return err
		}
	}
	return err
}

// flush sends ops in one transaction: lock the step's rows, reap the
// reservations of dead workers (once a second), the releases, then the
// reservations.
func (s *Schedule) flush(ctx context.Context, ops []*op) error {
	now := s.now()
	lease := s.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
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
	var clean []int64
	for _, o := range ops {
		switch {
		case o.release && o.clean():
			clean = append(clean, o.res.ID)
		case o.release:
			s.queueRelease(b, o, now)
		}
	}
	if len(clean) > 0 {
		b.Queue(releaseCleanSQL, s.Step, clean, now)
	}
	window := s.Cfg.WindowStart(now)
	for _, o := range ops {
		if !o.release && !o.flush {
			o.res, o.ok = Reservation{Units: o.units}, false
			b.Queue(reserveSQL, s.Step, o.cands, now, now.Add(o.horizon), window, o.units, now.Add(lease)).
				QueryRow(o.scan)
		}
	}
	return s.DB.SendBatch(ctx, b).Close()
}

// scan reads a reservation's row; none: no engine can serve it now.
func (o *op) scan(row pgx.Row) error {
	err := row.Scan(&o.res.ID, &o.res.Engine, &o.res.At, &o.res.failures)
	o.ok = err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// clean: o releases a call that ended well on an engine without errors
// in a row (most calls): what it changes is the same for all of them.
func (o *op) clean() bool { return o.release && o.result.ok && o.res.failures == 0 }

// releaseCleanSQL ends the clean calls of a batch in one statement ($1
// step, $2 their reservations, $3 now): as releaseSQL does for a success.
const releaseCleanSQL = `WITH d AS (DELETE FROM engine_reservations WHERE id = ANY($2::bigint[]) RETURNING name),
	g AS (SELECT name, count(*) AS n FROM d GROUP BY name)
	UPDATE engine_schedule e SET in_flight = greatest(e.in_flight - g.n, 0), updated_at = $3,
	       failures = 0, breaker_until = 'epoch'
	  FROM g WHERE e.step = $1 AND e.name = g.name`

// Flush returns once every release the replica made has been written (or
// failed): the ones that did not wait for their batch. A worker that stops
// calls it so that its last calls' slots are free at once, not when their
// reservations expire.
func (s *Schedule) Flush() { s.submit(&op{flush: true}, true) }
