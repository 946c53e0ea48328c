package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestPublishConsume runs the publisher and the consumer against one fresh
// virtual host, with publishing and consuming on separate connections.
func TestPublishConsume(t *testing.T) {
	t.Parallel()
	url := testenv.AMQP(t)
	reg, metrics := newMetrics(t)
	pubConn := dial(t, url, "test-publish", WithMetrics(metrics))
	subConn := dial(t, url, "test-consume", WithMetrics(metrics))
	pub := NewPublisher(pubConn)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	t.Run("ConcurrentPublishesAndHandlers", func(t *testing.T) {
		const n, concurrency = 400, 4
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 16 {
					msg := amqp.Publishing{MessageId: fmt.Sprint(i), Body: []byte(fmt.Sprintf(`{"i":%d}`, i))}
					if err := pub.Publish(ctx, wire.Exchange, wire.QueueASR, msg); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("publish: %v", err)
		}
		if got := counter(t, reg, "dubflow_broker_publishes_total", map[string]string{"conn": "test-publish", "result": "ack"}); got < n {
			t.Errorf("ack counter = %v, want >= %d", got, n)
		}

		var (
			mu       sync.Mutex
			seen     = map[string]int{}
			running  atomic.Int32
			maxSeen  atomic.Int32
			barrier  = make(chan struct{})
			arrived  atomic.Int32
			finished = make(chan struct{})
		)
		bg := consumeInBackground(t, ctx, subConn, ConsumeOptions{Queue: wire.QueueASR, Prefetch: 8, Concurrency: concurrency},
			func(ctx context.Context, d *Delivery) {
				now := running.Add(1)
				defer running.Add(-1)
				for {
					m := maxSeen.Load()
					if now <= m || maxSeen.CompareAndSwap(m, now) {
						break
					}
				}
				// The first handlers wait until concurrency of them run
				// at once, which proves the consumer reaches it.
				if arrived.Add(1) == concurrency {
					close(barrier)
				}
				<-barrier
				if d.ContentType != ContentTypeJSON || d.DeliveryMode != amqp.Persistent {
					t.Errorf("delivery %s: content type %q, mode %d", d.MessageId, d.ContentType, d.DeliveryMode)
				}
				if err := d.Ack(); err != nil {
					t.Errorf("ack: %v", err)
					return
				}
				mu.Lock()
				seen[d.MessageId]++
				if len(seen) == n {
					close(finished)
				}
				mu.Unlock()
			})
		select {
		case <-finished:
		case <-ctx.Done():
			mu.Lock()
			t.Fatalf("received %d of %d messages", len(seen), n)
		}
		if !subConn.Consuming() {
			t.Error("Consuming() = false while consuming")
		}
		if err := bg.end(); err != nil {
			t.Fatalf("Consume returned %v after cancel, want nil", err)
		}
		if subConn.Consuming() {
			t.Error("Consuming() = true after Consume returned")
		}
		if got := maxSeen.Load(); got != concurrency {
			t.Errorf("at most %d handlers ran at once, want exactly %d", got, concurrency)
		}
		mu.Lock()
		defer mu.Unlock()
		for id, count := range seen {
			if count != 1 {
				t.Errorf("message %s handled %d times without any failure", id, count)
			}
		}
	})

	t.Run("GracefulShutdownFinishesInFlightAndHandsBackTheRest", func(t *testing.T) {
		const n = 5
		for i := range n {
			if err := pub.Publish(ctx, wire.Exchange, wire.QueueTranslate, amqp.Publishing{MessageId: fmt.Sprint(i), Body: []byte(`{}`)}); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		started := make(chan struct{})
		release := make(chan struct{})
		var handled atomic.Int32
		var ackErr error
		var handlerCtxErr error
		bg := consumeInBackground(t, ctx, subConn, ConsumeOptions{Queue: wire.QueueTranslate, Prefetch: n, Concurrency: 1},
			func(hctx context.Context, d *Delivery) {
				if handled.Add(1) > 1 {
					t.Errorf("a second message (%s) started after shutdown began", d.MessageId)
					_ = d.Nack(true)
					return
				}
				close(started)
				<-release
				handlerCtxErr = hctx.Err()
				ackErr = d.Ack()
			})
		<-started
		bg.stop()
		// Consume must wait for the running handler: it cannot return
		// before release is closed, and the handler's ack must still reach
		// the broker.
		select {
		case err := <-bg.done:
			t.Fatalf("Consume returned (%v) while a handler was running", err)
		default:
		}
		close(release)
		if err := <-bg.done; err != nil {
			t.Fatalf("Consume: %v", err)
		}
		if ackErr != nil {
			t.Errorf("in-flight ack after shutdown began: %v", ackErr)
		}
		if handlerCtxErr != nil {
			t.Errorf("handler context cancelled during shutdown without a grace period: %v", handlerCtxErr)
		}
		ch := rawChannel(t, url)
		// The broker requeues the handed-back messages asynchronously:
		// wait (bounded) until the queue shows them.
		var ready int
		testenv.Poll(time.Now().Add(testenv.Within(t, 10*time.Second)), func() bool {
			q, err := ch.QueueDeclarePassive(wire.QueueTranslate, true, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			ready = q.Messages
			return ready >= n-1
		})
		if ready != n-1 {
			t.Errorf("%d messages back on the queue after shutdown, want %d", ready, n-1)
		}
		if _, err := ch.QueuePurge(wire.QueueTranslate, false); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("AckOnDeadChannelFailsAndMessageReturns", func(t *testing.T) {
		if err := pub.Publish(ctx, wire.Exchange, wire.QueueTTS, amqp.Publishing{MessageId: "x", Body: []byte(`{}`)}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		var deliveries atomic.Int32
		redelivered := make(chan bool, 1)
		bg := consumeInBackground(t, ctx, subConn, ConsumeOptions{Queue: wire.QueueTTS},
			func(_ context.Context, d *Delivery) {
				if deliveries.Add(1) == 1 {
					// Kill the channel under the handler, as a lost
					// connection would.
					_ = d.Acknowledger.(*amqp.Channel).Close()
					if err := d.Ack(); !errors.Is(err, amqp.ErrClosed) {
						t.Errorf("ack on a closed channel: %v, want amqp.ErrClosed", err)
					}
					return
				}
				if err := d.Ack(); err != nil {
					t.Errorf("ack after resubscribe: %v", err)
				}
				redelivered <- d.Redelivered
			})
		select {
		case r := <-redelivered:
			if !r {
				t.Error("second delivery not flagged as redelivered")
			}
		case <-ctx.Done():
			t.Fatal("message not redelivered after its channel died")
		}
		if err := bg.end(); err != nil {
			t.Fatalf("Consume: %v", err)
		}
		if got := counter(t, reg, "dubflow_broker_subscriptions_total", map[string]string{"queue": wire.QueueTTS}); got < 2 {
			t.Errorf("subscriptions to %s = %v, want a resubscription", wire.QueueTTS, got)
		}
	})

	t.Run("PanickingHandlerRequeues", func(t *testing.T) {
		if err := pub.Publish(ctx, wire.Exchange, wire.QueueMuxVideo, amqp.Publishing{MessageId: "p", Body: []byte(`{}`)}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		var calls atomic.Int32
		acked := make(chan struct{})
		bg := consumeInBackground(t, ctx, subConn, ConsumeOptions{Queue: wire.QueueMuxVideo},
			func(_ context.Context, d *Delivery) {
				if calls.Add(1) == 1 {
					panic("handler bug")
				}
				if err := d.Ack(); err != nil {
					t.Errorf("ack: %v", err)
				}
				close(acked)
			})
		select {
		case <-acked:
		case <-ctx.Done():
			t.Fatal("message not redelivered after a panic")
		}
		if err := bg.end(); err != nil {
			t.Fatalf("Consume: %v", err)
		}
	})

	t.Run("SilentNetworkCutIsDetectedAndSurvived", func(t *testing.T) {
		proxy, purl := newCutProxy(t, url)
		cutReg, cutMetrics := newMetrics(t)
		opts := []Option{WithHeartbeat(time.Second), WithBackoff(50*time.Millisecond, 500*time.Millisecond), WithMetrics(cutMetrics)}
		cutPub := NewPublisher(dial(t, purl, "cut-publish", opts...))
		cutSub := dial(t, purl, "cut-consume", opts...)
		var mu sync.Mutex
		seen := map[string]bool{}
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(seen)
		}
		bg := consumeInBackground(t, ctx, cutSub, ConsumeOptions{Queue: wire.QueueWaiting, Concurrency: 2},
			func(_ context.Context, d *Delivery) {
				mu.Lock()
				seen[d.MessageId] = true
				mu.Unlock()
				_ = d.Ack()
			})
		publish := func(prefix string) {
			t.Helper()
			for i := range 20 {
				msg := amqp.Publishing{MessageId: fmt.Sprintf("%s%d", prefix, i), Body: []byte(`{}`)}
				if err := cutPub.Publish(ctx, wire.Exchange, "waiting.visitor", msg); err != nil {
					t.Fatalf("publish %s%d: %v", prefix, i, err)
				}
			}
		}
		waitFor := func(n int) {
			t.Helper()
			end, _ := ctx.Deadline()
			if !testenv.Poll(end, func() bool { return count() >= n }) {
				t.Fatalf("received %d of %d", count(), n)
			}
		}
		publish("before-")
		waitFor(20)
		proxy.Cut()
		// The first publish after the cut waits for a confirm that cannot
		// come; the heartbeat notices the dead link, and Publish retries on
		// a new connection.
		publish("after-")
		waitFor(40)
		if err := bg.end(); err != nil {
			t.Fatalf("Consume: %v", err)
		}
		for _, name := range []string{"cut-publish", "cut-consume"} {
			if got := counter(t, cutReg, "dubflow_broker_reconnects_total", map[string]string{"conn": name}); got < 1 {
				t.Errorf("%s never reconnected after the cut", name)
			}
		}
	})

	t.Run("ClosedConnEndsConsume", func(t *testing.T) {
		c := dial(t, url, "test-close")
		bg := consumeInBackground(t, ctx, c, ConsumeOptions{Queue: wire.QueueExtractAudio}, func(context.Context, *Delivery) {})
		testenv.EventuallyWithin(t, 30*time.Second, "Consume to subscribe", c.Consuming)
		_ = c.Close()
		if err := <-bg.done; !errors.Is(err, ErrClosed) {
			t.Fatalf("Consume after Close: %v, want ErrClosed", err)
		}
		p := NewPublisher(c)
		if err := p.Publish(ctx, wire.Exchange, wire.QueueASR, amqp.Publishing{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Publish after Close: %v, want ErrClosed", err)
		}
	})
}
