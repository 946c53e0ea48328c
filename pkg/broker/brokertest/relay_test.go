package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
)

func TestRawRelayDoesEveryHopAndKeepsTheMessages(t *testing.T) {
	t.Parallel()
	url := testenv.AMQP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := false
	opts := RelayOptions{Queue: wire.QueueTTS, Prefetch: 8, Concurrency: 4, Seed: 10, Started: func() { started = true }}
	elapsed, err := RawRelay(ctx, url, 300, opts)
	if err != nil {
		t.Fatalf("RawRelay: %v", err)
	}
	if !started || elapsed <= 0 {
		t.Fatalf("started=%v elapsed=%s", started, elapsed)
	}
	// Every hop re-publishes before it acks, so the seeded messages are all
	// still there once the relay has stopped.
	ch := testenv.Channel(t, url)
	var left int
	if !testenv.Poll(time.Now().Add(testenv.Within(t, 10*time.Second)), func() bool {
		q, err := ch.QueueDeclarePassive(wire.QueueTTS, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		left = q.Messages
		return left >= opts.Seed
	}) {
		t.Fatalf("%d messages left on %s, want at least the %d seeded", left, wire.QueueTTS, opts.Seed)
	}
}
