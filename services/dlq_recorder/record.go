package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// recorder writes dead letters and compensation messages to Postgres.
type recorder struct {
	pool *pgxpool.Pool
	pub  step.Publisher
}

// recorded is the outcome of recording one dead letter.
type recorded struct {
	// ID is the dead_letters row, 0 when the message was recorded before.
	ID int64
	// Failed reports whether the task was (still is) marked failed by it;
	// false for a task already done or a stale duplicate of a step that
	// succeeded.
	Failed bool
}

// deadLetter records dl, marks its task failed (task.Fail: announced by
// event.task.failed unless the task had failed already) in one
// transaction, then publishes the event (outbox.Commit). A dead letter recorded
// before (same message id) changes nothing.
func (r *recorder) deadLetter(ctx context.Context, dl *deadLetter) (recorded, error) {
	var out recorded
	err := outbox.Commit(ctx, r.pool, r.pub, func(tx pgx.Tx) ([]int64, error) {
		id, err := insertDeadLetter(ctx, tx, dl)
		if err != nil {
			return nil, err
		}
		out.ID = id
		if id == 0 || dl.TaskID == nil {
			return nil, nil
		}
		reason := dl.Reason
		if dl.Step != "" {
			reason = dl.Step + ": " + dl.Reason
		}
		res, err := task.Apply(ctx, tx, task.Fail(task.Ref{ID: *dl.TaskID, Step: dl.Step, Trace: dl.TraceID}, dl.Part, reason))
		switch {
		case errors.Is(err, task.ErrNotFound):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("mark task %s failed: %w", *dl.TaskID, err)
		}
		out.Failed = res.To == task.Failed && res.Changed
		return []int64{res.EventID}, nil
	})
	switch {
	case errors.Is(err, outbox.ErrUnpublished):
		// Committed: the outbox sweep (reconciler, workers) publishes it.
		return out, fmt.Errorf("publish event.task.failed: %w", err)
	case err != nil:
		return recorded{}, fmt.Errorf("record dead letter %s: %w", dl.MessageID, err)
	}
	return out, nil
}

// insertDeadLetter records dl (dlq.Record) and returns its id, 0 when a
// dead letter with the same message id was recorded before.
func insertDeadLetter(ctx context.Context, tx pgx.Tx, dl *deadLetter) (int64, error) {
	return dlq.Record(ctx, tx, &dlq.Entry{MessageID: dl.MessageID, TaskID: dl.TaskID, Step: dl.Step, Part: dl.Part,
		Attempt: dl.Attempt, ErrorClass: dl.ErrorClass, Reason: truncate(dl.Reason, 8000), Original: dl.Original,
		Raw: dl.Raw, RoutingKey: dl.RoutingKey, Source: dl.Source, FailedAt: dl.FailedAt})
}

// compensation records one task.tts_compensation message against its
// segment (compensation.Record). It reports whether the message was new.
func (r *recorder) compensation(ctx context.Context, messageID string, c *wire.Compensation) (bool, error) {
	return compensation.Record(ctx, r.pool, messageID, c)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
