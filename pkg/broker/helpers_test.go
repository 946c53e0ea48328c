package broker

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// testLog writes the broker's logs through t.Log.
func testLog(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

// dial connects a Conn for the test and closes it when the test ends.
func dial(t testing.TB, url, name string, opts ...Option) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, name, testLog(t), opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawChannel opens a plain amqp091 channel on its own connection, for
// inspecting queues independently of the code under test.
func rawChannel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	return testenv.Channel(t, url)
}

// background is a Consume running on a goroutine of its own.
type background struct {
	// stop cancels the Consume's context.
	stop context.CancelFunc
	// done receives what Consume returned.
	done chan error
}

// consumeInBackground runs c.Consume with opts and handle until stop is
// called or the test ends.
func consumeInBackground(t testing.TB, ctx context.Context, c *Conn, opts ConsumeOptions,
	handle func(context.Context, *Delivery)) *background {
	cctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	bg := &background{stop: stop, done: make(chan error, 1)}
	go func() { bg.done <- c.Consume(cctx, opts, handle) }()
	return bg
}

// end stops the Consume and returns what it returned.
func (bg *background) end() error {
	bg.stop()
	return <-bg.done
}

// getOne polls queue with basic.get until a message arrives or the
// deadline passes. The message is acked.
func getOne(t testing.TB, ch *amqp.Channel, queue string, within time.Duration) amqp.Delivery {
	t.Helper()
	return get(t, ch, queue, within, true)
}

// get polls queue with basic.get, acking the message when autoAck, until a
// message arrives or within (scaled by testenv.Within) passes.
func get(t testing.TB, ch *amqp.Channel, queue string, within time.Duration, autoAck bool) amqp.Delivery {
	t.Helper()
	var d amqp.Delivery
	testenv.EventuallyWithin(t, within, "a message on "+queue, func() bool {
		got, ok, err := ch.Get(queue, autoAck)
		if err != nil {
			t.Fatalf("get from %s: %v", queue, err)
		}
		d = got
		return ok
	})
	return d
}

// newMetrics returns broker metrics registered on a registry of their own.
func newMetrics(t testing.TB) (*prometheus.Registry, *Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

// counter reads one counter series from a registry.
func counter(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
