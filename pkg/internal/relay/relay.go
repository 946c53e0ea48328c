// Package relay is the step runtime's side of the outbox (pkg/outbox):
// the messages a step's success committed are published right after the
// commit (Relay.Publish), their rows deleted in batches (DeleteLoop), a
// confirm that comes late still waited for, and rows a crash or a broker
// outage left behind swept periodically (SweepLoop). It sits under
// pkg/internal: it is the runtime's machinery, and services commit and
// publish through outbox.Commit instead.
package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/outboxrow"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/outbox"
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
	pub     outbox.Publisher
	log     zerolog.Logger
	metrics *Metrics
	done    chan int64
}

// New returns a relay publishing through pub. m may be nil.
func New(pool *pgxpool.Pool, pub outbox.Publisher, log zerolog.Logger, m *Metrics) *Relay {
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
func (r *Relay) Publish(ctx context.Context, msgs []*outbox.Message) error {
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
func (r *Relay) awaitLate(ctx context.Context, m *outbox.Message, pending confirmPending) {
	hold, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := outboxrow.HoldBack(hold, r.pool, m.ID, LateConfirmWait); err != nil {
		r.log.Warn().Err(err).Int64("outbox_id", m.ID).Msg("hold an outbox row back from the sweep while its confirm is late")
	}
	go r.lateConfirm(ctx, m, pending)
}

// lateConfirm waits for the confirm of m that Publish's caller gave up on
// and, if the broker confirms m, deletes its row as Publish would have.
func (r *Relay) lateConfirm(ctx context.Context, m *outbox.Message, pending confirmPending) {
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
func (r *Relay) published(ctx context.Context, m *outbox.Message) {
	r.metrics.published.WithLabelValues(m.RoutingKey).Inc()
	select {
	case r.done <- m.ID:
	default:
		// The deleter is behind; delete inline rather than block.
		if err := outboxrow.Delete(ctx, r.pool, []int64{m.ID}); err != nil {
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
		if err := outboxrow.Delete(c, r.pool, ids); err != nil {
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
// (outbox.Sweep), counting them in the relay's metrics; the rows
// it moved to dead_letters are counted and logged.
func (r *Relay) Sweep(ctx context.Context, age time.Duration, limit int) (int, error) {
	sent, moved, err := outbox.Sweep(ctx, r.pool, r.pub, age, limit)
	r.metrics.swept.Add(float64(len(sent)))
	for _, m := range moved {
		r.metrics.deadLettered.WithLabelValues(m.RoutingKey).Inc()
		r.log.Error().Int64("outbox_id", m.ID).Str("message_id", m.MessageID.String()).Str("routing_key", m.RoutingKey).
			Str("exchange", m.Exchange).Int("failures", outbox.MaxFailures).Msg("outbox message refused by the broker too often; moved to dead_letters")
	}
	return len(sent), err
}
