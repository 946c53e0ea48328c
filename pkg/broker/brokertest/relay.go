// Package brokertest holds broker helpers for tests and benchmarks in other
// packages, in the spirit of net/http/httptest. Its raw relay is the
// baseline the step runtime's throughput is compared with: the same hop
// (consume, publish with confirm, ack) done with amqp091-go alone.
package brokertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// RelayOptions configures RawRelay. Zero values take the defaults.
type RelayOptions struct {
	// Queue is the work queue relayed through: messages are consumed from
	// it and published back to wire.Exchange under its name. Default
	// wire.QueueASR.
	Queue string
	// Prefetch is the consumer's Qos prefetch. Default 32.
	Prefetch int
	// Concurrency is how many hops are in flight at once, each waiting for
	// its own confirm. Default 8.
	Concurrency int
	// Seed is how many messages circulate. Default Prefetch.
	Seed int
	// Body is the message body. Default a 200-byte JSON envelope.
	Body []byte
	// Started, if set, is called once seeding is done, just before the
	// first hop (a benchmark passes b.ResetTimer).
	Started func()
	// Work, if set, runs in each hop between the consume and the publish
	// (the step runtime's benchmark adds the Postgres writes of a step).
	Work func(ctx context.Context, body []byte) error
}

func (o *RelayOptions) defaults() {
	if o.Queue == "" {
		o.Queue = wire.QueueASR
	}
	if o.Prefetch <= 0 {
		o.Prefetch = 32
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Seed <= 0 {
		o.Seed = o.Prefetch
	}
	if o.Body == nil {
		o.Body = []byte(`{"task_id":"0b6f3c1e-6f2a-4d52-9a51-3c1f0e4b9a10","step":"asr","attempt":1,"trace_id":"trace-bench",` +
			`"created_at":"2024-01-01T12:00:00Z","payload":{"audio_key":"audios/x/source.wav","language":"en"}}`)
	}
}

// RawRelay declares the default topology on the virtual host of url (use
// a fresh one: the queue is purged), seeds opts.Seed persistent messages
// and relays them with plain amqp091-go until hops hops are done. A hop is
// one message consumed (manual ack, prefetch), published again to
// wire.Exchange with publisher confirms and mandatory set, and acked once
// the confirm arrived. Publishing and consuming use separate connections.
// It returns the time the hops took, seeding excluded.
func RawRelay(ctx context.Context, url string, hops int, opts RelayOptions) (time.Duration, error) {
	opts.defaults()
	subConn, err := amqp.Dial(url)
	if err != nil {
		return 0, fmt.Errorf("relay: dial: %w", err)
	}
	defer subConn.Close()
	pubConn, err := amqp.Dial(url)
	if err != nil {
		return 0, fmt.Errorf("relay: dial: %w", err)
	}
	defer pubConn.Close()
	publish, err := openPublisher(pubConn, opts)
	if err != nil {
		return 0, err
	}
	for range opts.Seed {
		if err := publish(ctx); err != nil {
			return 0, fmt.Errorf("relay: seed: %w", err)
		}
	}
	sub, err := openSubscriber(subConn, opts)
	if err != nil {
		return 0, err
	}
	return relayHops(ctx, sub, publish, hops, opts)
}

// openPublisher declares the topology, purges the queue and returns a
// function that publishes one message with a confirm on a confirm-mode
// channel of conn.
func openPublisher(conn *amqp.Connection, opts RelayOptions) (func(context.Context) error, error) {
	pub, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("relay: open channel: %w", err)
	}
	if err := broker.Declare(pub); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if _, err := pub.QueuePurge(opts.Queue, false); err != nil {
		return nil, fmt.Errorf("relay: purge %s: %w", opts.Queue, err)
	}
	if err := pub.Confirm(false); err != nil {
		return nil, fmt.Errorf("relay: enable confirms: %w", err)
	}
	var returned atomic.Int64
	returns := pub.NotifyReturn(make(chan amqp.Return, 1))
	go func() {
		for range returns {
			returned.Add(1)
		}
	}()
	drain(pub.NotifyClose(make(chan *amqp.Error, 1)))
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, ContentType: broker.ContentTypeJSON, Body: opts.Body}
	return func(ctx context.Context) error {
		dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, wire.Exchange, opts.Queue, true, false, msg)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("wait for confirm: %w", err)
		}
		if !acked {
			return errors.New("publish: nacked")
		}
		if returned.Load() > 0 {
			return errors.New("publish: returned unroutable")
		}
		return nil
	}, nil
}

// openSubscriber opens the consuming channel with the prefetch.
func openSubscriber(conn *amqp.Connection, opts RelayOptions) (*amqp.Channel, error) {
	sub, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("relay: open channel: %w", err)
	}
	if err := sub.Qos(opts.Prefetch, 0, false); err != nil {
		return nil, fmt.Errorf("relay: qos: %w", err)
	}
	drain(sub.NotifyClose(make(chan *amqp.Error, 1)))
	return sub, nil
}

// drain empties a notification channel until the library closes it.
func drain(closes <-chan *amqp.Error) {
	go func() {
		for range closes {
		}
	}()
}

// relay is one run of hops: what its workers share.
type relay struct {
	deliveries <-chan amqp.Delivery
	publish    func(context.Context) error
	work       func(ctx context.Context, body []byte) error
	hops       int64
	start      time.Time
	cancel     context.CancelFunc

	done     atomic.Int64
	elapsed  time.Duration
	finish   sync.Once
	firstErr error
	errOnce  sync.Once
}

// relayHops starts consuming and runs opts.Concurrency workers until hops
// hops are done or one fails.
func relayHops(ctx context.Context, sub *amqp.Channel, publish func(context.Context) error, hops int, opts RelayOptions) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Started != nil {
		opts.Started()
	}
	rl := &relay{publish: publish, work: opts.Work, hops: int64(hops), start: time.Now(), cancel: cancel}
	deliveries, err := sub.Consume(opts.Queue, "relay", false, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("relay: consume %s: %w", opts.Queue, err)
	}
	rl.deliveries = deliveries
	var wg sync.WaitGroup
	for range opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rl.worker(ctx)
		}()
	}
	wg.Wait()
	if rl.firstErr != nil {
		return 0, rl.firstErr
	}
	if rl.done.Load() < rl.hops {
		return 0, fmt.Errorf("relay: %d of %d hops: %w", rl.done.Load(), hops, context.Cause(ctx))
	}
	return rl.elapsed, nil
}

func (rl *relay) fail(err error) {
	rl.errOnce.Do(func() { rl.firstErr = err })
	rl.cancel()
}

// worker relays deliveries until the run ends.
func (rl *relay) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d, ok := <-rl.deliveries:
			if !ok {
				rl.fail(errors.New("relay: deliveries closed"))
				return
			}
			if !rl.hop(ctx, d) {
				return
			}
		}
	}
}

// hop does one hop: the work, the publish with its confirm, the ack. It
// reports whether the worker goes on.
func (rl *relay) hop(ctx context.Context, d amqp.Delivery) bool {
	if rl.work != nil {
		if err := rl.work(ctx, d.Body); err != nil {
			if ctx.Err() == nil {
				rl.fail(fmt.Errorf("relay: work: %w", err))
			}
			return false
		}
	}
	if err := rl.publish(ctx); err != nil {
		if ctx.Err() == nil {
			rl.fail(fmt.Errorf("relay: %w", err))
		}
		return false
	}
	if err := d.Ack(false); err != nil {
		rl.fail(fmt.Errorf("relay: ack: %w", err))
		return false
	}
	if rl.done.Add(1) == rl.hops {
		rl.finish.Do(func() { rl.elapsed = time.Since(rl.start) })
		rl.cancel()
		return false
	}
	return true
}

// BenchmarkRawRelay runs b.N hops of RawRelay on url and reports hops/s.
// Give it a fresh virtual host (testenv.AMQP).
func BenchmarkRawRelay(b *testing.B, url string, opts RelayOptions) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts.Started = b.ResetTimer
	elapsed, err := RawRelay(ctx, url, b.N, opts)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "hops/s")
}
