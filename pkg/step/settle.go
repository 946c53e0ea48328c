package step

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// Settler ends deliveries by the runtime's rules, for the step runner and
// for every other consumer of the system's queues (the dead-letter
// recorder): a delivery is acked, or handed back to its queue after a
// pause that grows while hand-backs follow each other (handBackPause, 1 s
// to 30 s) and starts again after an ack, so that an outage of the
// database neither spins the consumer nor burns through the queue's
// delivery limit. The zero value is ready; one Settler serves one
// consumer.
type Settler struct {
	// Pause gives the pause before the n-th hand-back in a row (n ≥ 1);
	// nil means handBackPause's 1 s to 30 s.
	Pause func(n int32) time.Duration
	// troubles counts hand-backs in a row.
	troubles atomic.Int32
}

// Ack acknowledges d and ends a run of hand-backs.
func (s *Settler) Ack(d Delivery, log zerolog.Logger) {
	s.troubles.Store(0)
	if err := d.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack failed; the broker will redeliver and the duplicate will be skipped")
	}
}

// HandBack returns d to its queue after the pause of the next hand-back in
// a row (at once when ctx ends first).
func (s *Settler) HandBack(ctx context.Context, d Delivery, log zerolog.Logger) {
	pause := handBackPause
	if s.Pause != nil {
		pause = s.Pause
	}
	t := time.NewTimer(pause(s.troubles.Add(1)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	if err := d.Nack(true); err != nil {
		log.Warn().Err(err).Msg("nack failed; the broker will redeliver")
	}
}

// BrokerSource returns the Source that consumes a queue of conn with opts:
// the one consumer of every worker and of the dead-letter recorder.
func BrokerSource(conn *broker.Conn, opts broker.ConsumeOptions) Source {
	return brokerSource{conn: conn, opts: opts}
}

// RunnerSource is BrokerSource for a step Runner: it also hands the
// runner, marked Unstarted, each delivery the consumer hands back
// unstarted when it stops (a shutdown, a pause), so that the runner
// records the hand-back. Only a Runner's handle knows such deliveries.
func RunnerSource(conn *broker.Conn, opts broker.ConsumeOptions) Source {
	return brokerSource{conn: conn, opts: opts, unstarted: true}
}

type brokerSource struct {
	conn      *broker.Conn
	opts      broker.ConsumeOptions
	unstarted bool
}

func (s brokerSource) Consume(ctx context.Context, handle func(context.Context, Delivery)) error {
	opts := s.opts
	if s.unstarted {
		opts.Unstarted = func(d amqp.Delivery) {
			handle(ctx, Delivery{Body: d.Body, RoutingKey: d.RoutingKey, MessageID: d.MessageId, Headers: d.Headers, Unstarted: true,
				Ack: func() error { return nil }, Nack: func(bool) error { return nil }})
		}
	}
	return s.conn.Consume(ctx, opts, func(ctx context.Context, d *broker.Delivery) {
		handle(ctx, Delivery{
			Body:       d.Body,
			RoutingKey: d.RoutingKey,
			MessageID:  d.MessageId,
			Headers:    d.Headers,
			Ack:        d.Ack,
			Nack:       func(requeue bool) error { return d.Nack(requeue) },
		})
	})
}
