package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// Dial connects a broker.Conn named name to url (with opts), with a
// confirming publisher on it; both are closed when the test ends.
func Dial(tb testing.TB, url, name string, opts ...broker.Option) (*broker.Conn, *broker.Publisher) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := broker.Dial(ctx, url, name, zerolog.Nop(), opts...)
	if err != nil {
		tb.Fatalf("dial %s: %v", name, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	pub := broker.NewPublisher(conn)
	tb.Cleanup(func() { _ = pub.Close() })
	return conn, pub
}

// Channel opens a plain amqp091-go channel on a connection of its own to
// url, as an outside producer or consumer would; both are closed when the
// test ends.
func Channel(tb testing.TB, url string) *amqp.Channel {
	tb.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		tb.Fatalf("dial %s: %v", config.Redact(url), err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatalf("open a channel: %v", err)
	}
	return ch
}

// Listen receives every message published to wire.Exchange with a routing
// key matching pattern from now on (an exclusive queue bound to the
// exchange, declared if it is not yet, acknowledged automatically) until
// the test ends.
func Listen(tb testing.TB, url, pattern string) <-chan amqp.Delivery {
	tb.Helper()
	ch := Channel(tb, url)
	if err := ch.ExchangeDeclare(wire.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		tb.Fatalf("declare %s: %v", wire.Exchange, err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		tb.Fatalf("declare a queue for %s: %v", pattern, err)
	}
	if err := ch.QueueBind(q.Name, pattern, wire.Exchange, false, nil); err != nil {
		tb.Fatalf("bind %s: %v", pattern, err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		tb.Fatalf("consume %s: %v", pattern, err)
	}
	return deliveries
}
