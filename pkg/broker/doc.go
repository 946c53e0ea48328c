// Package broker is dubflow's RabbitMQ layer, built on amqp091-go.
//
// It declares the wire topology — task_exchange, the step queues, the delay
// tiers, task.dlq, task.tts_compensation and mux_video's own event queue,
// mux_video.stream_end — (Topology.Declare),
// keeps a self-healing connection (Dial returns a *Conn that redials with
// capped exponential backoff and re-declares the topology after a broker
// restart or a cut connection), publishes with publisher confirms
// (Publisher.Publish returns only once the broker has taken responsibility
// for the message) and consumes with manual acknowledgements, a per-consumer
// prefetch and bounded concurrency (Conn.Consume).
//
// Publishing and consuming use separate connections, so that TCP
// back-pressure on a publishing connection never delays acknowledgements:
//
//	conns, err := broker.DialPair(ctx, url, "asr", log) // asr-publish and asr-consume
//	pub := broker.NewPublisher(conns.Publish)
//	err = conns.Consume.Consume(ctx, broker.ConsumeOptions{Queue: wire.QueueASR, Prefetch: 4, Concurrency: 2},
//		func(ctx context.Context, d *broker.Delivery) { ...; _ = d.Ack() })
//
// A cluster: the url given to Dial may name several nodes of one RabbitMQ
// cluster, separated by commas (AMQP_URL="amqp://u:p@rabbit-1:5672/,
// amqp://u:p@rabbit-2:5672/,amqp://u:p@rabbit-3:5672/"). A Conn connects to
// the first node that answers; when its connection is lost it tries the next
// node first, going round the list, so a dead node costs one failed dial.
// Publishers and consumers carry on over the new connection as after any
// loss: a publish whose confirm was lost is published again (at-least-once),
// a consumer subscribes again and the broker redelivers what was unacked.
// The work queues are quorum queues, with a member on every node, so their
// messages survive the node. While a quorum queue elects a new leader the
// broker nacks publishes to it, or confirms them late: Publish publishes
// such a message again, unchanged, with growing pauses, and fails (ErrNacked,
// ErrUnconfirmed) only when the refusal outlasts the refusal patience or the
// caller's context.
//
// Dead-lettering: every work queue and the waiting queue dead-letter through
// the default exchange ("") with routing key task.dlq, so task.dlq receives
// rejected, expired, overflowing and over-delivered messages without a
// dedicated dead-letter exchange. Delay tiers are fanout exchanges, each
// feeding a quorum queue whose queue-level TTL dead-letters back into
// task_exchange under the message's original routing key. Consumed queues
// and delay queues use the at-least-once dead-letter strategy, which
// RabbitMQ allows only together with x-overflow reject-publish; without a
// length limit that overflow setting changes nothing else.
//
// Recovery is done here rather than with amqp091-go's own Config.Recovery
// (new in v1.13): that mode re-subscribes consumers on a new channel whose
// delivery tags restart at 1, so an ack for a delivery received before the
// reconnect would carry a stale tag (settling another message, or closing
// the channel with PRECONDITION_FAILED). Here a delivery always acks on
// the channel it came from; after a loss that ack fails with an error and
// the broker redelivers the message.
package broker
