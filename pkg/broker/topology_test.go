package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestDelayExchangePicksFirstTierNotShorter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		d      time.Duration
		name   string
		actual time.Duration
	}{
		{0, "task.delay.1s", time.Second},
		{time.Millisecond, "task.delay.1s", time.Second},
		{time.Second, "task.delay.1s", time.Second},
		{1500 * time.Millisecond, "task.delay.2s", 2 * time.Second},
		{4 * time.Second, "task.delay.4s", 4 * time.Second},
		{33 * time.Second, "task.delay.60s", 60 * time.Second},
		{time.Hour, "task.delay.60s", 60 * time.Second},
	}
	for _, c := range cases {
		name, actual := DelayExchange(c.d)
		if name != c.name || actual != c.actual {
			t.Errorf("DelayExchange(%s) = %s, %s; want %s, %s", c.d, name, actual, c.name, c.actual)
		}
	}
	custom := Topology{DelayTiers: []time.Duration{5 * time.Second, 30 * time.Second}}
	if name, actual := custom.DelayExchange(10 * time.Second); name != "task.delay.30s" || actual != 30*time.Second {
		t.Errorf("custom DelayExchange(10s) = %s, %s; want task.delay.30s, 30s", name, actual)
	}
}

func TestTopologyValidate(t *testing.T) {
	t.Parallel()
	bad := []Topology{
		{DeliveryLimit: -1},
		{DelayTiers: []time.Duration{1500 * time.Millisecond}},
		{DelayTiers: []time.Duration{0}},
		{DelayTiers: []time.Duration{2 * time.Second, time.Second}},
		{DelayTiers: []time.Duration{time.Second, time.Second}},
	}
	for _, tp := range bad {
		if err := tp.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", tp)
		}
	}
	if err := (Topology{}).Validate(); err != nil {
		t.Errorf("Validate(zero) = %v", err)
	}
}

// TestTopology checks the declared topology end to end on a fresh virtual
// host: re-declaration, delay tiers, dead-lettering and returns.
func TestTopology(t *testing.T) {
	t.Parallel()
	url := testenv.AMQP(t)
	ch := rawChannel(t, url)
	if err := Declare(ch); err != nil {
		t.Fatalf("first Declare: %v", err)
	}
	if err := Declare(ch); err != nil {
		t.Fatalf("second Declare: %v", err)
	}
	for _, q := range append([]string{wire.QueueWaiting, wire.QueueDLQ, wire.QueueTTSCompensation, wire.QueueStreamEnd, "task.delay.1s", "task.delay.60s"}, wire.WorkQueues...) {
		if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
			t.Fatalf("queue %s not declared: %v", q, err)
		}
	}

	conn := dial(t, url, "topology-test")
	pub := NewPublisher(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("DelayTierReturnsToOriginalKey", func(t *testing.T) {
		name, _ := DelayExchange(time.Second)
		start := time.Now()
		if err := pub.Publish(ctx, name, wire.QueueASR, amqp.Publishing{Body: []byte(`{"delayed":true}`)}); err != nil {
			t.Fatalf("publish to %s: %v", name, err)
		}
		if d, ok, _ := ch.Get(wire.QueueASR, true); ok {
			t.Fatalf("message on %s at once, without delay: %s", wire.QueueASR, d.Body)
		}
		d := getOne(t, ch, wire.QueueASR, 10*time.Second)
		elapsed := time.Since(start)
		if string(d.Body) != `{"delayed":true}` {
			t.Errorf("body = %s", d.Body)
		}
		if elapsed < 900*time.Millisecond {
			t.Errorf("arrived after %s, want at least about 1s", elapsed)
		}
		if d.RoutingKey != wire.QueueASR || d.Exchange != wire.Exchange {
			t.Errorf("arrived via %q/%q, want %q/%q", d.Exchange, d.RoutingKey, wire.Exchange, wire.QueueASR)
		}
	})

	t.Run("RejectedReachesDLQ", func(t *testing.T) {
		if err := pub.Publish(ctx, wire.Exchange, wire.QueueExtractAudio, amqp.Publishing{Body: []byte(`{"reject":"me"}`)}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		d := get(t, ch, wire.QueueExtractAudio, 10*time.Second, false)
		if err := d.Reject(false); err != nil {
			t.Fatalf("reject: %v", err)
		}
		dead := getOne(t, ch, wire.QueueDLQ, 10*time.Second)
		if string(dead.Body) != `{"reject":"me"}` {
			t.Errorf("DLQ body = %s", dead.Body)
		}
		if reason := firstDeathReason(dead); reason != "rejected" {
			t.Errorf("x-death reason = %q, want rejected", reason)
		}
	})

	t.Run("UnroutablePublishFails", func(t *testing.T) {
		err := pub.Publish(ctx, wire.Exchange, "nobody.listens", amqp.Publishing{Body: []byte(`{}`)})
		if !errors.Is(err, ErrUnroutable) {
			t.Fatalf("publish to an unbound key: %v, want ErrUnroutable", err)
		}
		err = pub.Publish(ctx, "no_such_exchange", wire.QueueASR, amqp.Publishing{Body: []byte(`{}`)})
		var amqpErr *amqp.Error
		if !errors.As(err, &amqpErr) || amqpErr.Code != amqp.NotFound {
			t.Fatalf("publish to a missing exchange: %v, want a 404 channel error", err)
		}
		// Interleaved from many goroutines, each return is matched to its
		// own publish: exactly the unroutable half fails.
		var wg sync.WaitGroup
		var wrong atomic.Int32
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := wire.QueueMuxVideo
				if i%2 == 1 {
					key = "nobody.listens"
				}
				err := pub.Publish(ctx, wire.Exchange, key, amqp.Publishing{Body: []byte(`{}`)})
				if (key == wire.QueueMuxVideo) != (err == nil) || (err != nil && !errors.Is(err, ErrUnroutable)) {
					wrong.Add(1)
					t.Errorf("publish %d with key %s: %v", i, key, err)
				}
			}()
		}
		wg.Wait()
		if wrong.Load() == 0 {
			if n, err := ch.QueuePurge(wire.QueueMuxVideo, false); err != nil || n != 50 {
				t.Errorf("purged %d routable messages (%v), want 50", n, err)
			}
		}
		// The publisher recovers its channel for the next message.
		if err := pub.Publish(ctx, wire.Exchange, wire.QueueTTS, amqp.Publishing{Body: []byte(`{"after":"errors"}`)}); err != nil {
			t.Fatalf("publish after errors: %v", err)
		}
		if d := getOne(t, ch, wire.QueueTTS, 10*time.Second); string(d.Body) != `{"after":"errors"}` {
			t.Errorf("body = %s", d.Body)
		}
	})

	t.Run("EventsRouteToTheQueuesBoundForThem", func(t *testing.T) {
		// An integrator binds its own queue; the topology's one event
		// queue, mux_video's, takes the ends of tasks only.
		if _, err := ch.QueuePurge(wire.QueueStreamEnd, false); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"event.task.succeeded", "event.task.failed", "event.task.started", "event.task.cancelled"} {
			if err := pub.Publish(ctx, wire.Exchange, key, amqp.Publishing{Body: []byte(key)}); err != nil {
				t.Fatalf("publish %s: %v", key, err)
			}
		}
		for _, want := range []string{"event.task.failed", "event.task.cancelled"} {
			if d := getOne(t, ch, wire.QueueStreamEnd, 10*time.Second); d.RoutingKey != want {
				t.Errorf("%s got %s, want %s", wire.QueueStreamEnd, d.RoutingKey, want)
			}
		}
		if d, ok, _ := ch.Get(wire.QueueStreamEnd, true); ok {
			t.Errorf("%s got %s too", wire.QueueStreamEnd, d.RoutingKey)
		}
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			t.Fatalf("declare event queue: %v", err)
		}
		if err := ch.QueueBind(q.Name, wire.EventPrefix+"#", wire.Exchange, false, nil); err != nil {
			t.Fatalf("bind: %v", err)
		}
		if err := pub.Publish(ctx, wire.Exchange, wire.EventPrefix+"task.succeeded", amqp.Publishing{Body: []byte(`{"ok":1}`)}); err != nil {
			t.Fatalf("publish event: %v", err)
		}
		if d := getOne(t, ch, q.Name, 10*time.Second); d.RoutingKey != "event.task.succeeded" {
			t.Errorf("event routing key = %s", d.RoutingKey)
		}
	})
}

func TestDeliveryLimitReachesDLQ(t *testing.T) {
	t.Parallel()
	const limit = 2
	url := testenv.AMQP(t)
	conn := dial(t, url, "limit-test", WithTopology(Topology{DeliveryLimit: limit}))
	pub := NewPublisher(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := pub.Publish(ctx, wire.Exchange, wire.QueueTranslate, amqp.Publishing{Body: []byte(`{"poison":true}`)}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	ch := rawChannel(t, url)
	deliveries := 0
	end, _ := ctx.Deadline()
	reached := testenv.Poll(end, func() bool {
		d, ok, err := ch.Get(wire.QueueTranslate, false)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if !ok {
			q, err := ch.QueueDeclarePassive(wire.QueueDLQ, true, false, false, false, nil)
			return err == nil && q.Messages > 0
		}
		deliveries++
		if err := d.Nack(false, true); err != nil {
			t.Fatalf("nack: %v", err)
		}
		if deliveries > limit+1 {
			t.Fatalf("delivered %d times with a delivery limit of %d", deliveries, limit)
		}
		return false
	})
	if !reached {
		t.Fatalf("message never reached %s after %d deliveries", wire.QueueDLQ, deliveries)
	}
	dead := getOne(t, ch, wire.QueueDLQ, 5*time.Second)
	if string(dead.Body) != `{"poison":true}` {
		t.Errorf("DLQ body = %s", dead.Body)
	}
	if reason := firstDeathReason(dead); reason != "delivery_limit" {
		t.Errorf("x-death reason = %q, want delivery_limit", reason)
	}
	if deliveries < limit {
		t.Errorf("dead-lettered after %d deliveries, limit %d", deliveries, limit)
	}
}

// firstDeathReason reads the reason of the latest x-death entry.
func firstDeathReason(d amqp.Delivery) string {
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) == 0 {
		return ""
	}
	entry, _ := deaths[0].(amqp.Table)
	reason, _ := entry["reason"].(string)
	return reason
}
