package broker_test

import (
	"context"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// A worker dials a pair of connections, consumes its queue and hands work
// on with confirmed publishes; a transient failure goes to a delay tier
// under the same routing key.
func ExampleDialPair() {
	ctx := context.Background()
	log := zerolog.New(os.Stderr)
	conns, err := broker.DialPair(ctx, "amqp://guest:guest@localhost:5672/", "asr", log)
	if err != nil {
		log.Fatal().Err(err).Msg("dial broker")
	}
	defer conns.Close()
	pub := broker.NewPublisher(conns.Publish)

	err = conns.Consume.Consume(ctx, broker.ConsumeOptions{Queue: wire.QueueASR, Prefetch: 4, Concurrency: 2},
		func(ctx context.Context, d *broker.Delivery) {
			next := amqp.Publishing{Body: []byte(`{"step":"translate"}`)}
			if err := pub.Publish(ctx, wire.Exchange, wire.QueueTranslate, next); err != nil {
				delay, _ := broker.DelayExchange(2 * time.Second)
				if err := pub.Publish(ctx, delay, wire.QueueASR, amqp.Publishing{Body: d.Body}); err != nil {
					_ = d.Nack(true)
					return
				}
			}
			_ = d.Ack()
		})
	if err != nil {
		log.Error().Err(err).Msg("consume")
	}
}
