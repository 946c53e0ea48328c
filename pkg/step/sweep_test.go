package step_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestBadOutboxRowsDoNotBlockTheSweep: rows the broker refuses (no queue
// for the routing key, no such exchange) stay in the outbox with their
// failure recorded, and the rows behind them are published.
func TestBadOutboxRowsDoNotBlockTheSweep(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	env := asrEnvelope(t)
	next, err := env.Next(wire.StepTranslate, wire.Translate{TaskID: env.TaskID, SegmentIDs: []string{"seg-0"},
		SourceLanguage: "en", TargetLanguage: "es", BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(next)
	rows := []struct{ exchange, key string }{
		{wire.Exchange, "task.nowhere"}, // unroutable
		{"no_such_exchange", wire.QueueTranslate},
		{wire.Exchange, wire.QueueTranslate}, // the good one, behind them
	}
	for _, r := range rows {
		if _, err := h.db.Pool.Exec(ctx, `INSERT INTO outbox (message_id, exchange, routing_key, body, created_at)
			VALUES ($1, $2, $3, $4, now() - interval '1 minute')`, uuid.New(), r.exchange, r.key, good); err != nil {
			t.Fatal(err)
		}
	}
	var calls callLog
	h.run(wire.QueueASR, route(effect(&calls)))
	got, err := wire.Decode(h.next(wire.QueueTranslate, 30*time.Second))
	if err != nil || got.TaskID != env.TaskID {
		t.Fatalf("swept message = %+v, %v", got, err)
	}
	testenv.EventuallyWithin(t, 20*time.Second, "the bad rows' failures recorded", func() bool {
		var n int
		_ = h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE failures > 0`).Scan(&n)
		return n == 2
	})
	var errs []string
	r, err := h.db.Pool.Query(ctx, `SELECT last_error FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			t.Fatal(err)
		}
		errs = append(errs, s)
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "unroutable") || !strings.Contains(errs[1], "no_such_exchange") {
		t.Errorf("outbox rows left: %q, want the two bad ones with their reasons", errs)
	}
}

// TestSlowCommitLeavesItsMessagesToTheSweep: a commit that takes half the
// outbox sweep's age or more (here a staged statement that sleeps; in
// production a fan-in lock waited for under load) does not publish its
// messages itself, as the sweep may already be publishing them (their rows
// count their age from the transaction's start): the delivery is handed
// back with the reason recorded, and the message arrives once, from the
// sweep. Before, the runner published it right after such a commit too,
// and the sweep could publish it again (pkg/step's overlap test saw 11 tts
// messages for 10 parts under load).
func TestSlowCommitLeavesItsMessagesToTheSweep(t *testing.T) {
	t.Parallel()
	h := setup(t)
	env := asrEnvelope(t)
	newTask(t, h, env)
	slow := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		msg.Exec(`SELECT pg_sleep(0.7)`) // the harness's SweepAge is 1 s
		return msg.Emit(wire.StepTranslate, wire.Translate{TaskID: env.TaskID, SegmentIDs: []string{"seg-0"},
			SourceLanguage: "en", TargetLanguage: "es", BatchSize: 20})
	})
	h.run(wire.QueueASR, route(slow))
	h.publish(env)
	got, err := wire.Decode(h.next(wire.QueueTranslate, 30*time.Second))
	if err != nil || got.TaskID != env.TaskID || got.Step != wire.StepTranslate {
		t.Fatalf("translate message = %+v, %v", got, err)
	}
	testenv.EventuallyWithin(t, 20*time.Second, "the outbox empty and the hand-back recorded", func() bool {
		return h.outboxRows() == 0 && len(handBacks(t, h, env.TaskID)) > 0
	})
	back := handBacks(t, h, env.TaskID)[0]
	if back.Status != "publish_failed" || !strings.Contains(back.Detail, "left to the sweep") {
		t.Errorf("hand-back %+v, want publish_failed: left to the sweep", back)
	}
	if n := h.ready(wire.QueueTranslate); n != 0 {
		t.Errorf("%d more translate messages, want the one from the sweep only", n)
	}
}
