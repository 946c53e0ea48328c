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
	amqp "github.com/rabbitmq/amqp091-go"
)

// RelayOptions configures RawRelay. Zero values take the defaults.
type RelayOptions struct {
	// Queue is the work queue relayed through: messages are consumed from
	// it and published back to broker.Exchange under its name. Default
	// broker.QueueASR.
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
		o.Queue = broker.QueueASR
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
// broker.Exchange with publisher confirms and mandatory set, and acked once
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

	pub, err := pubConn.Channel()
	if err != nil {
		return 0, fmt.Errorf("relay: open channel: %w", err)
	}
	if err := broker.Declare(pub); err != nil {
		return 0, fmt.Errorf("relay: %w", err)
	}
	if _, err := pub.QueuePurge(opts.Queue, false); err != nil {
		return 0, fmt.Errorf("relay: purge %s: %w", opts.Queue, err)
	}
	if err := pub.Confirm(false); err != nil {
		return 0, fmt.Errorf("relay: enable confirms: %w", err)
	}
	var returned atomic.Int64
	returns := pub.NotifyReturn(make(chan amqp.Return, 1))
	go func() {
		for range returns {
			returned.Add(1)
		}
	}()
	closes := pub.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		for range closes {
		}
	}()
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, ContentType: broker.ContentTypeJSON, Body: opts.Body}
	publish := func(ctx context.Context) error {
		dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, broker.Exchange, opts.Queue, true, false, msg)
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
	}
	for range opts.Seed {
		if err := publish(ctx); err != nil {
			return 0, fmt.Errorf("relay: seed: %w", err)
		}
	}

	sub, err := subConn.Channel()
	if err != nil {
		return 0, fmt.Errorf("relay: open channel: %w", err)
	}
	if err := sub.Qos(opts.Prefetch, 0, false); err != nil {
		return 0, fmt.Errorf("relay: qos: %w", err)
	}
	subCloses := sub.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		for range subCloses {
		}
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		done     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel()
	}
	if opts.Started != nil {
		opts.Started()
	}
	start := time.Now()
	deliveries, err := sub.Consume(opts.Queue, "relay", false, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("relay: consume %s: %w", opts.Queue, err)
	}
	var elapsed time.Duration
	var finish sync.Once
	for range opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case d, ok := <-deliveries:
					if !ok {
						fail(errors.New("relay: deliveries closed"))
						return
					}
					if opts.Work != nil {
						if err := opts.Work(ctx, d.Body); err != nil {
							if ctx.Err() == nil {
								fail(fmt.Errorf("relay: work: %w", err))
							}
							return
						}
					}
					if err := publish(ctx); err != nil {
						if ctx.Err() == nil {
							fail(fmt.Errorf("relay: %w", err))
						}
						return
					}
					if err := d.Ack(false); err != nil {
						fail(fmt.Errorf("relay: ack: %w", err))
						return
					}
					if done.Add(1) == int64(hops) {
						finish.Do(func() { elapsed = time.Since(start) })
						cancel()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if done.Load() < int64(hops) {
		return 0, fmt.Errorf("relay: %d of %d hops: %w", done.Load(), hops, context.Cause(ctx))
	}
	return elapsed, nil
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
