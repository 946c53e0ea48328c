package worker

import (
	"context"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/step"
)

// Consume makes the worker consume queue too, beside its step's own, by
// the runtime's consumer and hand-back rules (step.BrokerSource,
// step.Settler), as dlq_recorder consumes its queues: handle gets each
// delivery, one at a time, with the consumer's settler, and ends it with
// settle.Ack or settle.HandBack (a hand-back waits a pause that grows while
// hand-backs follow each other). On a stop, a handler still running after
// SHUTDOWN_GRACE_SECONDS sees its context cancelled. The queue is consumed
// on the worker's consuming connection, so /readyz counts it with the
// step's (broker.Conn.Consuming).
func (d *Deps) Consume(queue string, handle func(ctx context.Context, dl step.Delivery, settle *step.Settler)) {
	d.jobs = append(d.jobs, func(ctx context.Context) error {
		conn, err := d.Consumer(ctx)
		if err != nil {
			return err
		}
		var settle step.Settler
		src := step.BrokerSource(conn, broker.ConsumeOptions{Queue: queue, Concurrency: 1,
			Tag: d.Name + "-" + queue, Grace: d.Config.ShutdownGrace()})
		return src.Consume(ctx, func(ctx context.Context, dl step.Delivery) { handle(ctx, dl, &settle) })
	})
}
