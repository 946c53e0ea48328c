package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
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

func TestAddCommitsWithItsTransactionOnly(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	m := outbox.New(wire.Exchange, "event.task.succeeded", []byte(`{}`))
	errRollback := errors.New("roll back")
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if err := outbox.Add(ctx, tx, m); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) || m.ID == 0 {
		t.Fatalf("add in a rolled back transaction: err %v, id %d", err, m.ID)
	}
	if n := rows(t, db.Pool); n != 0 {
		t.Fatalf("a rolled back message stayed in the outbox: %d rows", n)
	}
	add(t, db.Pool, "task.asr")
	if n := rows(t, db.Pool); n != 1 {
		t.Fatalf("committed messages in the outbox = %d, want 1", n)
	}
}

func TestFlushPublishesInOrderAndKeepsWhatFailed(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	msgs := add(t, db.Pool, "task.asr", "task.translate", "task.tts")
	ids := []int64{msgs[0].ID, msgs[1].ID, msgs[2].ID}
	pub := &recorder{okBefore: 2}
	err := outbox.Flush(ctx, db.Pool, pub, ids)
	if err == nil {
		t.Fatal("flush with a failing third publish returned nil")
	}
	if got := pub.published(); fmt.Sprint(got) != "[task.asr task.translate]" {
		t.Fatalf("published %v, want the first two in order", got)
	}
	if n := rows(t, db.Pool); n != 1 {
		t.Fatalf("rows left = %d, want the one whose publish failed", n)
	}
	pub.okBefore = -1
	if err := outbox.Flush(ctx, db.Pool, pub, ids); err != nil {
		t.Fatal(err)
	}
	if got := pub.published(); fmt.Sprint(got) != "[task.asr task.translate task.tts]" {
		t.Fatalf("published %v: a row was published twice or lost", got)
	}
	for i, p := range pub.got {
		if p.MessageId != msgs[i].MessageID.String() || p.DeliveryMode != amqp.Persistent {
			t.Errorf("publish %d: message id %q, mode %d; want %s, persistent", i, p.MessageId, p.DeliveryMode, msgs[i].MessageID)
		}
	}
	if n := rows(t, db.Pool); n != 0 {
		t.Fatalf("rows left after a full flush = %d", n)
	}
}
