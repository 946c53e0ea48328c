package step

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// relay moves committed outbox messages to the broker: right after their
// commit (publish), and by a periodic sweep for rows a crash left behind.
// Published rows are deleted in batches in the background.
type relay struct {
	pool    *pgxpool.Pool
	pub     Publisher
	log     zerolog.Logger
	metrics *Metrics
	done    chan int64
}

func newRelay(pool *pgxpool.Pool, pub Publisher, log zerolog.Logger, m *Metrics) *relay {
	return &relay{pool: pool, pub: pub, log: log, metrics: m, done: make(chan int64, 4096)}
}

// publish publishes msgs in order, each confirmed, and queues their rows for
// deletion. It stops at the first failure; the rows left are the sweep's.
func (r *relay) publish(ctx context.Context, msgs []*outMsg) error {
	for _, o := range msgs {
		if err := r.pub.Publish(ctx, o.exchange, o.routingKey, publishing(o)); err != nil {
			return fmt.Errorf("publish %s: %w", o.routingKey, err)
		}
		r.metrics.published.WithLabelValues(o.routingKey).Inc()
		select {
		case r.done <- o.id:
		default:
			// The deleter is behind; delete inline rather than block.
			if _, err := r.pool.Exec(ctx, `DELETE FROM outbox WHERE id = $1`, o.id); err != nil {
				r.log.Warn().Err(err).Int64("outbox_id", o.id).Msg("delete published outbox row")
			}
		}
	}
	return nil
}

// deleteLoop deletes published rows in batches until ctx is done, then
// flushes what it holds.
func (r *relay) deleteLoop(ctx context.Context) {
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

// sweepLoop publishes outbox rows older than age every interval until ctx
// is done.
func (r *relay) sweepLoop(ctx context.Context, interval, age time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := r.Sweep(ctx, age, 100)
			if err != nil && ctx.Err() == nil {
				r.log.Warn().Err(err).Msg("outbox sweep")
			}
			if n > 0 {
				r.log.Info().Int("messages", n).Msg("outbox sweep published messages left behind")
			}
		}
	}
}

// Sweep publishes up to limit outbox rows older than age and deletes them,
// in one transaction that locks the rows (SKIP LOCKED), so replicas sweeping
// at once never publish the same row twice.
func (r *relay) Sweep(ctx context.Context, age time.Duration, limit int) (int, error) {
	n := 0
	var perr error
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		n, perr, err = publishLocked(ctx, tx, r.pub, `SELECT id, message_id, exchange, routing_key, body FROM outbox
			WHERE created_at < now() - $1::interval AND (next_try_at IS NULL OR next_try_at <= now())
			ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, age, limit)
		return err
	})
	if err != nil {
		return 0, err
	}
	r.metrics.swept.Add(float64(n))
	return n, perr
}

// publishTimeout bounds one publish of the sweep: the publisher retries a
// publish lost with its channel until its context ends.
const publishTimeout = 10 * time.Second

// publishLocked selects outbox rows with query (which locks them), publishes
// them in order, each confirmed, and deletes those published. A row the
// broker refuses (unroutable, nacked, its exchange missing) does not block
// the others: its failure is recorded on the row (failures, last_error) and
// it is tried again after a growing pause (next_try_at, at most a minute).
// A publish that times out (the broker is unreachable) stops the run, as
// the rows after it would fail too. The publish failures are returned as
// perr (those published are still deleted when tx commits); err reports a
// database failure, after which tx must roll back.
func publishLocked(ctx context.Context, tx pgx.Tx, pub Publisher, query string, args ...any) (sent int, perr, err error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return 0, nil, fmt.Errorf("select outbox: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*outMsg, error) {
		o := &outMsg{}
		return o, row.Scan(&o.id, &o.messageID, &o.exchange, &o.routingKey, &o.body)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("read outbox: %w", err)
	}
	var ids []int64
	var failed []error
	for _, o := range msgs {
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := pub.Publish(pctx, o.exchange, o.routingKey, publishing(o))
		cancel()
		if err == nil {
			ids = append(ids, o.id)
			continue
		}
		err = fmt.Errorf("publish outbox row %d to %s: %w", o.id, o.routingKey, err)
		failed = append(failed, err)
		if _, uerr := tx.Exec(ctx, `UPDATE outbox SET failures = failures + 1, last_error = $2,
				next_try_at = now() + least(interval '1 second' * power(2, least(failures, 6)), interval '1 minute')
			WHERE id = $1`, o.id, wire.Reason(err.Error())); uerr != nil {
			return 0, errors.Join(failed...), fmt.Errorf("record outbox row %d failure: %w", o.id, uerr)
		}
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			break
		}
	}
	perr = errors.Join(failed...)
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = ANY($1)`, ids); err != nil {
			return 0, perr, fmt.Errorf("delete published outbox rows: %w", err)
		}
	}
	return len(ids), perr, nil
}
