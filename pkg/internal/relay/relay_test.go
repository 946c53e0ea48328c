package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/internal/relay"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// recorder is a Publisher that records what it was asked to publish and
// fails every publish after the first okBefore (-1: never fails).
type recorder struct {
	mu       sync.Mutex
	got      []amqp.Publishing
	keys     []string
	okBefore int
}

func (r *recorder) Publish(_ context.Context, _, key string, msg amqp.Publishing) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.okBefore >= 0 && len(r.got) >= r.okBefore {
		return errors.New("broker unreachable")
	}
	r.got = append(r.got, msg)
	r.keys = append(r.keys, key)
	return nil
}

func (r *recorder) published() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

func add(t *testing.T, pool *pgxpool.Pool, keys ...string) []*outbox.Message {
	t.Helper()
	var msgs []*outbox.Message
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		for _, k := range keys {
			m := outbox.New(wire.Exchange, k, []byte(fmt.Sprintf(`{"key":%q}`, k)))
			if err := outbox.Add(context.Background(), tx, m); err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func rows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSweepTakesOnlyOldRowsAndNeverTwice(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	old := add(t, db.Pool, "task.asr", "task.translate", "task.tts", "task.mux_video")
	if _, err := db.Pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	add(t, db.Pool, "task.extract_audio") // young: a relay may still be publishing it
	pub := &recorder{okBefore: -1}
	// Replicas sweeping at once: SKIP LOCKED shares the rows out.
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := relay.New(db.Pool, pub, zerolog.Nop(), nil).Sweep(ctx, time.Minute, 100)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	got := pub.published()
	if total != len(old) || len(got) != len(old) {
		t.Fatalf("sweeps published %d (%v), reported %d; want each of the %d old rows once", len(got), got, total, len(old))
	}
	seen := map[string]bool{}
	for _, k := range got {
		if seen[k] {
			t.Fatalf("%s published twice: %v", k, got)
		}
		seen[k] = true
	}
	if n := rows(t, db.Pool); n != 1 {
		t.Fatalf("rows left = %d, want the young one", n)
	}
}

// TestRelayPublishesThroughTheBroker runs the whole path on the real
// broker: commit, publish with a confirm, the consumer sees the outbox's
// message id, and the deleter removes the row.
func TestRelayPublishesThroughTheBroker(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, pub := brokertest.Dial(t, url, "outbox-test")
	deliveries := brokertest.Listen(t, url, "event.#")
	relay := relay.New(db.Pool, pub, zerolog.Nop(), nil)
	deleted := make(chan struct{})
	go func() { defer close(deleted); relay.DeleteLoop(ctx) }()
	msgs := add(t, db.Pool, "event.task.succeeded")
	if err := relay.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-deliveries:
		if d.MessageId != msgs[0].MessageID.String() || string(d.Body) != string(msgs[0].Body) {
			t.Fatalf("got message id %q body %s; want %s %s", d.MessageId, d.Body, msgs[0].MessageID, msgs[0].Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the published event did not arrive within 10s")
	}
	cancel()
	<-deleted // DeleteLoop flushes what it holds before it returns
	if n := rows(t, db.Pool); n != 0 {
		t.Fatalf("published row not deleted: %d rows left", n)
	}
}

// TestRelayDeletesARowConfirmedLate: a message whose confirm comes after
// Publish's context ended (a broker answering 1.5 s late) is an error to
// the caller, but its row is deleted once the broker confirms it, so the
// sweep, which leaves the row alone meanwhile, does not send a copy; the
// message arrives once. Without the late wait the row stays and the sweep
// publishes it again.
func TestRelayDeletesARowConfirmedLate(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	url := testenv.AMQP(t)
	px := testenv.CutProxy(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, pub := brokertest.Dial(t, px.URL, "outbox-late-test")
	deliveries := brokertest.Listen(t, url, "event.#")
	relay := relay.New(db.Pool, pub, zerolog.Nop(), nil)
	go relay.DeleteLoop(ctx)
	msgs := add(t, db.Pool, "event.task.succeeded", "event.task.failed")
	if err := relay.Publish(ctx, msgs[:1]); err != nil { // the channel opened before the delay
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 10*time.Second, "the first row deleted", func() bool { return rows(t, db.Pool) == 1 })
	if err := px.Delay(1500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	err := relay.Publish(short, msgs[1:])
	cancelShort()
	var pending *broker.ConfirmPendingError
	if !errors.As(err, &pending) {
		t.Fatalf("publish with a confirm 1.5 s late and 300 ms to wait: %v, want a ConfirmPendingError", err)
	}
	// A sweep meanwhile (of rows of any age) leaves the row alone: its
	// confirm is on the way.
	if n, err := relay.Sweep(ctx, 0, 100); err != nil || n != 0 {
		t.Fatalf("a sweep while the confirm is late published %d rows (%v), want none", n, err)
	}
	testenv.EventuallyWithin(t, 10*time.Second, "the late-confirmed row deleted", func() bool { return rows(t, db.Pool) == 0 })
	got := map[string]int{}
	for range 2 {
		select {
		case d := <-deliveries:
			got[d.MessageId]++
		case <-time.After(10 * time.Second):
			t.Fatalf("deliveries %v: want both messages", got)
		}
	}
	for _, m := range msgs {
		if got[m.MessageID.String()] != 1 {
			t.Errorf("message %s delivered %d times, want once (deliveries %v)", m.MessageID, got[m.MessageID.String()], got)
		}
	}
}
