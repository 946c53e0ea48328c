package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/wire"
)

// Depths are the messages ready in the queues the lost-message check reads.
type Depths struct {
	// Ready counts the ready messages of each work queue (by its name, which
	// is also its routing key).
	Ready map[string]int
	// Delayed counts the messages of every delay tier together: retries on
	// their way back to some work queue.
	Delayed int
}

// DepthFunc reads the broker's queue depths.
type DepthFunc func(ctx context.Context) (Depths, error)

// brokerDepths reads depths with passive queue declarations on a channel of
// conn (AMQP's queue.declare-ok carries the ready message count; no
// management plugin needed). Messages delivered to a worker and not yet
// acknowledged are not counted: the worker claims them at once (its prefetch
// equals its concurrency), so their parts are running, not pending.
func brokerDepths(conn *broker.Conn, tiers []time.Duration) DepthFunc {
	return func(ctx context.Context) (Depths, error) {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ch, err := conn.Channel(ctx)
		if err != nil {
			return Depths{}, err
		}
		defer ch.Close()
		d := Depths{Ready: map[string]int{}}
		for _, q := range wire.WorkQueues {
			st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				return Depths{}, fmt.Errorf("inspect queue %s: %w", q, err)
			}
			d.Ready[q] = st.Messages
		}
		for _, tier := range tiers {
			q := wire.DelayQueue(tier)
			st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				return Depths{}, fmt.Errorf("inspect queue %s: %w", q, err)
			}
			d.Delayed += st.Messages
		}
		return d, nil
	}
}
