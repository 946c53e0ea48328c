// Package deadletter is the one writer of dead_letters: the dead-letter
// recorder's and the outbox relay's records (Insert), the replays' marks
// (MarkReplayed) and the purges (Purge). pkg/dlq is the door services use
// (dlq.Record, dlq.Replay, dlq.BulkPurge); pkg/view reads the table for the
// read model. Nothing here knows the wire contract: callers say what to
// record, and the table's rules (one row per message id, an original that
// jsonb refuses kept as raw bytes only) live here, once.
package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotFound is returned for a dead letter id without a row.
var ErrNotFound = errors.New("dead letter not found")

// Entry is one dead letter to record.
type Entry struct {
	// MessageID names the failed delivery; a second Insert of the same
	// (non-empty) id records nothing.
	MessageID string
	// TaskID is nil for a message that names no task.
	TaskID     *uuid.UUID
	Step, Part string
	Attempt    int
	ErrorClass string
	// Reason is recorded as given: callers bound and clean it.
	Reason string
	// Original is the failed message when it is JSON (nil otherwise); Raw
	// is the delivery's body as received.
	Original, Raw []byte
	RoutingKey    string
	// Source says who dead-lettered it (service, broker, outbox, ...).
	Source string
	// FailedAt is when it failed; zero is now.
	FailedAt time.Time
}

const insertSQL = `INSERT INTO dead_letters (message_id, task_id, step, attempt, error_class,
	failure_reason, original_message, raw_body, routing_key, source, failed_at, part)
	VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, coalesce($11::timestamptz, now()), $12)
	ON CONFLICT (message_id) WHERE message_id <> '' DO NOTHING
	RETURNING id`

// Insert records e in tx and returns its id, 0 when a dead letter with the
// same message id was recorded before. An original that jsonb refuses
// (valid JSON with a \u0000 in a string, say) is kept in raw_body only.
func Insert(ctx context.Context, tx pgx.Tx, e *Entry) (int64, error) {
	if e.Original == nil {
		id, err := insert(ctx, tx, e, nil)
		if err != nil {
			return 0, fmt.Errorf("insert dead letter: %w", err)
		}
		return id, nil
	}
	sp, err := tx.Begin(ctx) // a savepoint
	if err != nil {
		return 0, fmt.Errorf("insert dead letter: %w", err)
	}
	id, err := insert(ctx, sp, e, e.Original)
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code[:2] == "22" {
		_ = sp.Rollback(ctx)
		if id, err = insert(ctx, tx, e, nil); err != nil {
			return 0, fmt.Errorf("insert dead letter: %w", err)
		}
		return id, nil
	}
	if err != nil {
		_ = sp.Rollback(ctx)
		return 0, fmt.Errorf("insert dead letter: %w", err)
	}
	if err := sp.Commit(ctx); err != nil {
		return 0, fmt.Errorf("insert dead letter: %w", err)
	}
	return id, nil
}

// insert runs insertSQL for e with original as its original message.
func insert(ctx context.Context, q pgx.Tx, e *Entry, original []byte) (int64, error) {
	var orig *string
	if original != nil {
		s := string(original)
		orig = &s
	}
	var failedAt *time.Time
	if !e.FailedAt.IsZero() {
		failedAt = &e.FailedAt
	}
	var id int64
	err := q.QueryRow(ctx, insertSQL, e.MessageID, e.TaskID, e.Step, e.Attempt, e.ErrorClass,
		e.Reason, orig, e.Raw, e.RoutingKey, e.Source, failedAt, e.Part).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// Execer runs a statement: a pool or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Querier runs a query: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// MarkReplayed marks the dead letters where holds (a condition on
// dead_letters, with args) replayed once more.
func MarkReplayed(ctx context.Context, q Execer, where string, args ...any) error {
	_, err := q.Exec(ctx, `UPDATE dead_letters SET replayed_at = now(), replay_count = replay_count + 1
		WHERE `+where, args...)
	return err
}

// Purge deletes every dead letter where holds (a condition on dead_letters
// with the arguments args) and keeps each, as it was, in
// dead_letters_archive with the time and by (who purged), in one
// statement. It returns the ids purged.
func Purge(ctx context.Context, q Querier, where string, args []any, by string) ([]int64, error) {
	rows, err := q.Query(ctx, `WITH gone AS (DELETE FROM dead_letters WHERE `+where+` RETURNING *)
		INSERT INTO dead_letters_archive (id, message_id, task_id, step, part, attempt, error_class, failure_reason,
			original_message, raw_body, routing_key, source, failed_at, recorded_at, replayed_at, replay_count, purged_by)
		SELECT id, message_id, task_id, step, part, attempt, error_class, failure_reason, original_message, raw_body,
			routing_key, source, failed_at, recorded_at, replayed_at, replay_count, $`+fmt.Sprint(len(args)+1)+` FROM gone
		RETURNING id`, append(args, by)...)
	if err != nil {
		return nil, fmt.Errorf("purge dead letters: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("purge dead letters: %w", err)
	}
	return ids, nil
}
