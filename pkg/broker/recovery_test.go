package broker

import (
	"context"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestRecoveryAfterRestartAndForcedClose streams messages through a private
// broker, restarts it mid-stream and later closes every connection by
// force, and checks that the publisher and the consumer recover by
// themselves and that every confirmed message is delivered at least once.
// The test finishing at all is the deadlock check.
func TestRecoveryAfterRestartAndForcedClose(t *testing.T) {
	t.Parallel()
	rabbit := testenv.PrivateRabbit(t)
	reg, metrics := newMetrics(t)
	opts := []Option{WithMetrics(metrics), WithBackoff(50*time.Millisecond, time.Second), WithHeartbeat(2 * time.Second)}
	pubConn := dial(t, rabbit.URL(), "recovery-publish", opts...)
	subConn := dial(t, rabbit.URL(), "recovery-consume", opts...)
	pub := NewPublisher(pubConn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The test's state, guarded by mu; changed is closed and replaced on
	// every change, so that waiting never polls.
	var (
		mu        sync.Mutex
		received  = map[int]int{}
		confirmed = map[int]bool{}
		published int
		changed   = make(chan struct{})
	)
	update := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
		close(changed)
		changed = make(chan struct{})
	}
	// await blocks until cond (called with mu held) holds or ctx is done.
	await := func(ctx context.Context, cond func() bool) bool {
		for {
			mu.Lock()
			ok, wait := cond(), changed
			mu.Unlock()
			if ok {
				return true
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return false
			}
		}
	}
	consumer := consumeInBackground(t, ctx, subConn, ConsumeOptions{Queue: wire.QueueASR, Prefetch: 16, Concurrency: 4},
		func(_ context.Context, d *Delivery) {
			id, err := strconv.Atoi(d.MessageId)
			if err != nil {
				t.Errorf("message id %q: %v", d.MessageId, err)
			}
			update(func() { received[id]++ })
			// An ack lost with its channel is fine: the message comes
			// back and is counted once more.
			_ = d.Ack()
		})

	// Producers publish back to back, at most window messages ahead of the
	// consumer, so that publishes are in flight whenever the broker goes.
	const window = 200
	pctx, stopProducing := context.WithCancel(ctx)
	var producers sync.WaitGroup
	for range 4 {
		producers.Add(1)
		go func() {
			defer producers.Done()
			for {
				id := 0
				if pctx.Err() != nil || !await(pctx, func() bool { return published-len(received) < window }) {
					return
				}
				update(func() { published++; id = published })
				msg := amqp.Publishing{MessageId: strconv.Itoa(id), Body: []byte(`{"n":` + strconv.Itoa(id) + `}`)}
				if err := pub.Publish(ctx, wire.Exchange, wire.QueueASR, msg); err != nil {
					t.Errorf("publish %d: %v", id, err)
					cancel() // ends the test's waits at once
					return
				}
				update(func() { confirmed[id] = true })
			}
		}()
	}

	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		if !await(ctx, cond) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("timed out waiting until %s (%d confirmed, %d received unique)", what, len(confirmed), len(received))
		}
	}
	// flowing is true once both more messages have been confirmed and more
	// unique ones received than when it was called.
	flowing := func(more int) func() bool {
		mu.Lock()
		sent, got := len(confirmed)+more, len(received)+more
		mu.Unlock()
		return func() bool { return len(confirmed) >= sent && len(received) >= got }
	}

	waitUntil("messages flow", flowing(50))
	rabbit.Restart()
	waitUntil("messages flow after the restart", flowing(50))
	if out, err := exec.CommandContext(ctx, "rabbitmqctl", "-q", "-n", rabbit.Node(),
		"close_all_connections", "broker test: forced close").CombinedOutput(); err != nil {
		t.Fatalf("close_all_connections: %v: %s", err, out)
	}
	waitUntil("messages flow after the forced close", flowing(50))
	stopProducing()
	producers.Wait()

	waitUntil("every confirmed message is delivered", func() bool {
		for id := range confirmed {
			if received[id] == 0 {
				return false
			}
		}
		return true
	})
	if err := consumer.end(); err != nil {
		t.Fatalf("Consume: %v", err)
	}

	mu.Lock()
	dups := 0
	for _, n := range received {
		dups += n - 1
	}
	t.Logf("%d messages confirmed, %d received, %d duplicate deliveries", len(confirmed), len(received), dups)
	mu.Unlock()
	for _, name := range []string{"recovery-publish", "recovery-consume"} {
		if got := counter(t, reg, "dubflow_broker_reconnects_total", map[string]string{"conn": name}); got < 2 {
			t.Errorf("%s reconnected %v times, want at least 2", name, got)
		}
	}
}
