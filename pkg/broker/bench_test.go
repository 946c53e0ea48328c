package broker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// BenchmarkRawRelay measures the baseline hop with amqp091-go alone:
// consume, publish with confirm, ack; 8 hops in flight, prefetch 32, on a
// fresh virtual host of the local broker.
func BenchmarkRawRelay(b *testing.B) {
	brokertest.BenchmarkRawRelay(b, testenv.AMQP(b), brokertest.RelayOptions{})
}

// BenchmarkBrokerRelay does the same hop through this package (Conn,
// Publisher, Consume), to show what the self-healing layer costs.
func BenchmarkBrokerRelay(b *testing.B) {
	const prefetch, concurrency = 32, 8
	url := testenv.AMQP(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := zerolog.Nop()
	pubConn, err := broker.Dial(ctx, url, "bench-publish", log)
	if err != nil {
		b.Fatal(err)
	}
	defer pubConn.Close()
	subConn, err := broker.Dial(ctx, url, "bench-consume", log)
	if err != nil {
		b.Fatal(err)
	}
	defer subConn.Close()
	pub := broker.NewPublisher(pubConn)
	body := []byte(`{"task_id":"0b6f3c1e-6f2a-4d52-9a51-3c1f0e4b9a10","step":"asr","attempt":1,"trace_id":"trace-bench",` +
		`"created_at":"2024-01-01T12:00:00Z","payload":{"audio_key":"audios/x/source.wav","language":"en"}}`)
	for range prefetch {
		if err := pub.Publish(ctx, wire.Exchange, wire.QueueASR, amqp.Publishing{Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	cctx, stop := context.WithCancel(ctx)
	var hops atomic.Int64
	var failOnce sync.Once
	var failed error
	fail := func(err error) {
		failOnce.Do(func() { failed = err })
		stop()
	}
	b.ResetTimer()
	start := time.Now()
	var elapsed time.Duration
	err = subConn.Consume(cctx, broker.ConsumeOptions{Queue: wire.QueueASR, Prefetch: prefetch, Concurrency: concurrency},
		func(ctx context.Context, d *broker.Delivery) {
			if err := pub.Publish(ctx, wire.Exchange, wire.QueueASR, amqp.Publishing{Body: d.Body}); err != nil {
				fail(err)
				return
			}
			if err := d.Ack(); err != nil {
				fail(err)
				return
			}
			if hops.Add(1) == int64(b.N) {
				elapsed = time.Since(start)
				stop()
			}
		})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if failed != nil {
		b.Fatal(failed)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "hops/s")
}
