package broker

import (
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The names of the topology (the exchange, the queues and their routing
// keys, the delay tiers) are pkg/wire's: wire.Exchange, wire.QueueASR,
// wire.DelayQueue, ...

// DefaultDeliveryLimit is the x-delivery-limit of work queues when
// Topology.DeliveryLimit is zero.
const DefaultDeliveryLimit = 20

// DefaultDelayTiers are the delay tiers declared when Topology.DelayTiers is
// empty.
var DefaultDelayTiers = []time.Duration{
	1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
	16 * time.Second, 32 * time.Second, 60 * time.Second,
}

// Topology describes the queues and exchanges Declare creates. The zero
// value is the production topology.
//
// Queue arguments cannot change on an existing queue: RabbitMQ answers a
// declaration with different arguments with PRECONDITION_FAILED. Changing
// DeliveryLimit or the tiers of a running system needs the queues deleted
// (or the values moved to a policy) first.
type Topology struct {
	// DeliveryLimit is x-delivery-limit on the work queues and the waiting
	// queue: a message redelivered more often goes to DLQ. Zero means
	// DefaultDeliveryLimit.
	DeliveryLimit int
	// DelayTiers are the delays of the retry queues, whole seconds,
	// ascending. Empty means DefaultDelayTiers.
	DelayTiers []time.Duration
}

// Declare declares the default topology on ch. It is idempotent.
func Declare(ch *amqp.Channel) error {
	return Topology{}.Declare(ch)
}

// DelayExchange returns the exchange of the first default delay tier that
// is at least d (the last tier when d is larger) and that tier's delay.
func DelayExchange(d time.Duration) (name string, actual time.Duration) {
	return Topology{}.DelayExchange(d)
}

// DelayExchange returns the exchange of the first tier of t that is at least
// d (the last tier when d is larger) and that tier's delay. A message
// published there under its work routing key comes back to wire.Exchange under
// that key after the tier's delay.
func (t Topology) DelayExchange(d time.Duration) (name string, actual time.Duration) {
	tiers := t.tiers()
	for _, tier := range tiers {
		if tier >= d {
			return wire.DelayQueue(tier), tier
		}
	}
	last := tiers[len(tiers)-1]
	return wire.DelayQueue(last), last
}

// Validate reports whether the tiers are whole, positive, ascending seconds
// and the delivery limit is not negative.
func (t Topology) Validate() error {
	if t.DeliveryLimit < 0 {
		return fmt.Errorf("topology: delivery limit %d is negative", t.DeliveryLimit)
	}
	tiers := t.tiers()
	for i, tier := range tiers {
		if tier < time.Second || tier%time.Second != 0 {
			return fmt.Errorf("topology: delay tier %s is not a positive whole number of seconds", tier)
		}
		if i > 0 && tier <= tiers[i-1] {
			return fmt.Errorf("topology: delay tiers %v are not strictly ascending", tiers)
		}
	}
	return nil
}

func (t Topology) tiers() []time.Duration {
	if len(t.DelayTiers) == 0 {
		return DefaultDelayTiers
	}
	return t.DelayTiers
}

func (t Topology) deliveryLimit() int {
	if t.DeliveryLimit == 0 {
		return DefaultDeliveryLimit
	}
	return t.DeliveryLimit
}

// workArgs are the arguments of every consumed queue: quorum, a delivery
// limit, at-least-once dead-lettering into DLQ (which needs reject-publish
// overflow).
func (t Topology) workArgs() amqp.Table {
	return amqp.Table{
		amqp.QueueTypeArg:           amqp.QueueTypeQuorum,
		"x-delivery-limit":          int64(t.deliveryLimit()),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": wire.QueueDLQ,
		"x-dead-letter-strategy":    "at-least-once",
		amqp.QueueOverflowArg:       amqp.QueueOverflowRejectPublish,
	}
}

// Declare declares every exchange, queue and binding of t on ch. It is
// idempotent. A declaration error closes ch (AMQP semantics); the caller
// should discard it.
func (t Topology) Declare(ch *amqp.Channel) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if err := ch.ExchangeDeclare(wire.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", wire.Exchange, err)
	}
	quorum := amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
	if err := declareQueue(ch, wire.QueueDLQ, quorum, wire.QueueDLQ); err != nil {
		return err
	}
	if err := declareQueue(ch, wire.QueueTTSCompensation, quorum, wire.QueueTTSCompensation); err != nil {
		return err
	}
	// mux_video's events (wire.QueueStreamEnd): like the two above, consumed
	// with hand-backs that wait out an outage, so without a delivery limit.
	if err := declareQueue(ch, wire.QueueStreamEnd, quorum, wire.StreamEndKeys...); err != nil {
		return err
	}
	for _, q := range wire.WorkQueues {
		if err := declareQueue(ch, q, t.workArgs(), q); err != nil {
			return err
		}
	}
	if err := declareQueue(ch, wire.QueueWaiting, t.workArgs(), wire.BindingWaiting); err != nil {
		return err
	}
	for _, tier := range t.tiers() {
		if err := declareDelay(ch, tier); err != nil {
			return err
		}
	}
	return nil
}

func declareQueue(ch *amqp.Channel, name string, args amqp.Table, keys ...string) error {
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", name, err)
	}
	for _, key := range keys {
		if err := ch.QueueBind(name, key, wire.Exchange, false, nil); err != nil {
			return fmt.Errorf("bind queue %s to %s with %s: %w", name, wire.Exchange, key, err)
		}
	}
	return nil
}

// declareDelay declares one delay tier: a fanout exchange and a quorum queue
// of the same name whose queue-level TTL dead-letters into Exchange without
// a dead-letter routing key, so the message keeps its original key.
func declareDelay(ch *amqp.Channel, tier time.Duration) error {
	name := wire.DelayQueue(tier)
	if err := ch.ExchangeDeclare(name, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", name, err)
	}
	args := amqp.Table{
		amqp.QueueTypeArg:        amqp.QueueTypeQuorum,
		amqp.QueueMessageTTLArg:  tier.Milliseconds(),
		"x-dead-letter-exchange": wire.Exchange,
		"x-dead-letter-strategy": "at-least-once",
		amqp.QueueOverflowArg:    amqp.QueueOverflowRejectPublish,
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", name, err)
	}
	if err := ch.QueueBind(name, "", name, false, nil); err != nil {
		return fmt.Errorf("bind queue %s to %s: %w", name, name, err)
	}
	return nil
}
