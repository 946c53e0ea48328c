package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Metrics count what the outbox published.
type Metrics struct {
	published     *prometheus.CounterVec
	lateConfirmed *prometheus.CounterVec
	swept         prometheus.Counter
	deadLettered  *prometheus.CounterVec
}

// NewMetrics creates the outbox metrics and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		published: ops.Counters(reg, "dubflow_outbox_published_total",
			"Outbox messages published right after their commit, by routing key.", "routing_key"),
		lateConfirmed: ops.Counters(reg, "dubflow_outbox_late_confirmed_total",
			"Outbox messages confirmed by the broker after their publisher stopped waiting, so not left to the sweep, by routing key (also in published).",
			"routing_key"),
		swept: ops.Counter(reg, "dubflow_outbox_swept_total",
			"Outbox messages published by the sweep (left behind by a crash or a broker outage)."),
		deadLettered: ops.Counters(reg, "dubflow_outbox_dead_lettered_total",
			"Outbox messages the broker refused MaxFailures times, moved to dead_letters (source outbox), by routing key.",
			"routing_key"),
	}
}

// Relay moves committed outbox messages to the broker: right after their
// commit (Publish), and by a periodic sweep for rows a crash left behind
// (SweepLoop). Rows published right after their commit are deleted in
// batches by DeleteLoop.
type Relay struct {
	pool    *pgxpool.Pool
	pub     Publisher
	log     zerolog.Logger
	metrics *Metrics
	done    chan int64
}

// NewRelay returns a relay publishing through pub. m may be nil.
func NewRelay(pool *pgxpool.Pool, pub Publisher, log zerolog.Logger, m *Metrics) *Relay {
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Relay{pool: pool, pub: pub, log: log, metrics: m, done: make(chan int64, 4096)}
}

// Publish publishes msgs, committed just before, in order, each confirmed,
// and queues their rows for DeleteLoop. It stops at the first failure; the
// rows left are the sweep's. A message whose confirm had not come when ctx
// ended (the publisher's ConfirmPendingError) is still waited for, for up
// to LateConfirmWait, and its row deleted if the broker confirms it after
// all, so that the sweep does not send a copy of a message already on its
// queue (a slow broker under load confirms seconds late).
func (r *Relay) Publish(ctx context.Context, msgs []*Message) error {
	for _, m := range msgs {
		if err := r.pub.Publish(ctx, m.Exchange, m.RoutingKey, m.Publishing()); err != nil {
			var pending confirmPending
			if errors.As(err, &pending) {
				r.awaitLate(context.WithoutCancel(ctx), m, pending)
			}
			return fmt.Errorf("publish %s: %w", m.RoutingKey, err)
		}
		r.published(ctx, m)
	}
	return nil
}

// LateConfirmWait is how long Publish waits for a confirm its caller's
// context gave up on, the row held back from the sweep meanwhile.
const LateConfirmWait = 10 * time.Second

// confirmPending is the publisher's error for a message it sent but whose
// confirm it stopped waiting for (broker.ConfirmPendingError).
type confirmPending interface {
	error
	Await(ctx context.Context) error
}

// awaitLate holds m's row back from every process's sweep for
// LateConfirmWait (its next_try_at, which the sweep respects) and waits
// for the confirm in the background: if the broker confirms m, its row is
// deleted as Publish would have; if not, the sweep publishes it after.
// Without the hold a sweep could take the row while its confirm is on
// the way.
func (r *Relay) awaitLate(ctx context.Context, m *Message, pending confirmPending) {
	hold, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.pool.Exec(hold, `UPDATE outbox SET next_try_at = now() + $2::interval WHERE id = $1`,
		m.ID, LateConfirmWait); err != nil {
		r.log.Warn().Err(err).Int64("outbox_id", m.ID).Msg("hold an outbox row back from the sweep while its confirm is late")
	}
	go r.lateConfirm(ctx, m, pending)
}

// lateConfirm waits for the confirm of m that Publish's caller gave up on
// and, if the broker confirms m, deletes its row as Publish would have.
func (r *Relay) lateConfirm(ctx context.Context, m *Message, pending confirmPending) {
	ctx, cancel := context.WithTimeout(ctx, LateConfirmWait)
	defer cancel()
	if err := pending.Await(ctx); err != nil {
		r.log.Debug().Err(err).Int64("outbox_id", m.ID).Str("routing_key", m.RoutingKey).
			Msg("no late confirm: the outbox sweep publishes the message")
		return
	}
	r.metrics.lateConfirmed.WithLabelValues(m.RoutingKey).Inc()
	r.published(ctx, m)
}

// published counts m as published and queues its row for DeleteLoop.
func (r *Relay) published(ctx context.Context, m *Message) {
	r.metrics.published.WithLabelValues(m.RoutingKey).Inc()
	select {
	case r.done <- m.ID:
	default:
		// The deleter is behind; delete inline rather than block.
		if _, err := r.pool.Exec(ctx, `DELETE FROM outbox WHERE id = $1`, m.ID); err != nil {
			r.log.Warn().Err(err).Int64("outbox_id", m.ID).Msg("delete published outbox row")
		}
	}
}

// DeleteLoop deletes the rows Publish published, in batches, until ctx is
// done, then flushes what it holds.
func (r *Relay) DeleteLoop(ctx context.Context) {
	ids := make([]int64, 0, 512)
	flush := func() {
		if len(ids) == 0 {
			return
		}
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		// The delete waits for the WAL flush: a delete lost in a crash
		// would publish again a message whose confirm was not lost (a
		// second event.task.succeeded for integrators).
		if _, err := r.pool.Exec(c, `DELETE FROM outbox WHERE id = ANY($1)`, ids); err != nil {
			// The rows stay; the sweep publishes them again and consumers
			// skip the duplicates.
			r.log.Warn().Err(err).Int("rows", len(ids)).Msg("delete published outbox rows")
		}
		ids = ids[:0]
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case id := <-r.done:
			ids = append(ids, id)
			if len(ids) >= cap(ids) {
				flush()
			}
		case <-t.C:
			flush()
		case <-ctx.Done():
			for {
				select {
				case id := <-r.done:
					ids = append(ids, id)
				default:
					flush()
					return
				}
			}
		}
	}
}

// SweepLoop publishes outbox rows older than age every interval until ctx
// is done.
func (r *Relay) SweepLoop(ctx context.Context, interval, age time.Duration) {
	ops.Every(ctx, interval, func(ctx context.Context) {
		n, err := r.Sweep(ctx, age, 100)
		if err != nil && ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("outbox sweep")
		}
		if n > 0 {
			r.log.Info().Int("messages", n).Msg("outbox sweep published messages left behind")
		}
	})
}

// Sweep publishes up to limit outbox rows older than age and deletes them
// (see the package's Sweep), counting them in the relay's metrics; the rows
// it moved to dead_letters are counted and logged.
func (r *Relay) Sweep(ctx context.Context, age time.Duration, limit int) (int, error) {
	sent, moved, err := sweep(ctx, r.pool, r.pub, age, limit)
	r.metrics.swept.Add(float64(len(sent)))
	for _, m := range moved {
		r.metrics.deadLettered.WithLabelValues(m.RoutingKey).Inc()
		r.log.Error().Int64("outbox_id", m.ID).Str("message_id", m.MessageID.String()).Str("routing_key", m.RoutingKey).
			Str("exchange", m.Exchange).Int("failures", MaxFailures).Msg("outbox message refused by the broker too often; moved to dead_letters")
	}
	return len(sent), err
}

// Sweep publishes up to limit outbox rows older than age (and not pausing
// after a failed publish), in order, each confirmed, and deletes them, in
// one transaction that locks the rows (SKIP LOCKED), so processes sweeping at
// once never publish the same row twice. It returns the messages published;
// rows whose publish failed wait for a later sweep, and a row the broker
// refused MaxFailures times is moved to dead_letters (see publishLocked).
func Sweep(ctx context.Context, pool *pgxpool.Pool, pub Publisher, age time.Duration, limit int) ([]*Message, error) {
	sent, _, err := sweep(ctx, pool, pub, age, limit)
	return sent, err
}

// sweep is Sweep, also returning the rows moved to dead_letters.
func sweep(ctx context.Context, pool *pgxpool.Pool, pub Publisher, age time.Duration, limit int) (sent, moved []*Message, err error) {
	var perr error
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		sent, moved, perr, err = publishLocked(ctx, tx, pub, true, `SELECT id, message_id, exchange, routing_key, body, failures FROM outbox
			WHERE created_at < now() - $1::interval AND (next_try_at IS NULL OR next_try_at <= now())
			ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, age, limit)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return sent, moved, perr
}

// Flush publishes the given outbox rows, committed already, now, each
// confirmed, and deletes them; rows another process is publishing at the
// same moment are skipped. A change and its messages commit together with
// Commit, which flushes them; Flush alone is for rows committed by
// statements of their own (held parts let in by the start-up recovery and
// the reconciler) or left behind (the reconciler's outbox pass).
func Flush(ctx context.Context, pool *pgxpool.Pool, pub Publisher, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	var perr error
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		_, _, perr, err = publishLocked(ctx, tx, pub, false, `SELECT id, message_id, exchange, routing_key, body, failures FROM outbox
			WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids)
		return err
	})
	if err != nil {
		return err
	}
	return perr
}

// publishTimeout bounds one publish of a sweep or flush: the publisher
// retries a publish lost with its channel until its context ends.
const publishTimeout = 10 * time.Second

// MaxFailures is how often the broker may refuse an outbox row (no queue
// for its routing key, its exchange missing, a nack) before the sweep moves
// it to dead_letters with the last refusal as its reason: retried with
// pauses growing to a minute, about six minutes. Publishes that time out
// (the broker unreachable) count towards the pauses but never move a row.
const MaxFailures = 10

// publishLocked selects outbox rows with query (which locks them and reads
// id, message_id, exchange, routing_key, body, failures), publishes them in
// order, each confirmed, and deletes those published. A row the broker
// refuses does not block the others: its failure is recorded on the row
// (failures, last_error) and it is tried again after a growing pause
// (next_try_at, at most a minute); with move, a row refused for the
// MaxFailures-th time is moved to dead_letters instead (returned as moved).
// A publish that times out (the broker is unreachable) stops the run, as
// the rows after it would fail too. The publish failures are returned as
// perr (those published are still deleted when tx commits); err reports a
// database failure, after which tx must roll back.
func publishLocked(ctx context.Context, tx pgx.Tx, pub Publisher, move bool, query string, args ...any) (sent, moved []*Message, perr, err error) {
	msgs, failures, err := readLocked(ctx, tx, query, args...)
	if err != nil {
		return nil, nil, nil, err
	}
	var ids []int64
	var failed []error
	for i, m := range msgs {
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := pub.Publish(pctx, m.Exchange, m.RoutingKey, m.Publishing())
		cancel()
		if err == nil {
			ids = append(ids, m.ID)
			sent = append(sent, m)
			continue
		}
		err = fmt.Errorf("publish outbox row %d to %s: %w", m.ID, m.RoutingKey, err)
		failed = append(failed, err)
		outage := ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)
		if move && !outage && failures[i]+1 >= MaxFailures {
			if derr := deadLetter(ctx, tx, m, failures[i]+1, err); derr != nil {
				return nil, nil, errors.Join(failed...), derr
			}
			moved = append(moved, m)
			continue
		}
		if _, uerr := tx.Exec(ctx, `UPDATE outbox SET failures = failures + 1, last_error = $2,
				next_try_at = now() + least(interval '1 second' * power(2, least(failures, 6)), interval '1 minute')
			WHERE id = $1`, m.ID, wire.Reason(err.Error())); uerr != nil {
			return nil, nil, errors.Join(failed...), fmt.Errorf("record outbox row %d failure: %w", m.ID, uerr)
		}
		if outage {
			break
		}
	}
	perr = errors.Join(failed...)
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = ANY($1)`, ids); err != nil {
			return nil, nil, perr, fmt.Errorf("delete published outbox rows: %w", err)
		}
	}
	return sent, moved, perr, nil
}

// readLocked reads the outbox rows query selects, with their failures so far.
func readLocked(ctx context.Context, tx pgx.Tx, query string, args ...any) ([]*Message, []int, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("select outbox: %w", err)
	}
	var failures []int
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Message, error) {
		m := &Message{}
		var n int
		err := row.Scan(&m.ID, &m.MessageID, &m.Exchange, &m.RoutingKey, &m.Body, &n)
		failures = append(failures, n)
		return m, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read outbox: %w", err)
	}
	return msgs, failures, nil
}
