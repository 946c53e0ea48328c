package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/deadletter"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DeadLetter is one recorded dead letter: an item of GET
// /api/dead-letters, of a task's deadLetters and of `dubctl dlq list
// --json`.
type DeadLetter struct {
	ID            int64      `json:"id"`
	MessageID     string     `json:"messageId"`
	TaskID        *uuid.UUID `json:"taskId"`
	Step          string     `json:"step"`
	Part          string     `json:"part"`
	Attempt       int        `json:"attempt"`
	ErrorClass    string     `json:"errorClass"`
	FailureReason string     `json:"failureReason"`
	RoutingKey    string     `json:"routingKey"`
	Source        string     `json:"source"`
	FailedAt      time.Time  `json:"failedAt"`
	RecordedAt    time.Time  `json:"recordedAt"`
	ReplayedAt    *time.Time `json:"replayedAt"`
	ReplayCount   int        `json:"replayCount"`
	// OriginalMessage is the failed message (GetDeadLetter only; null when
	// it was not JSON).
	OriginalMessage json.RawMessage `json:"originalMessage,omitempty"`
	// RawBody is the delivery as received (GetDeadLetter only); the API
	// does not show it.
	RawBody []byte `json:"-"`
}

// Replayable reports whether the dead letter can be replayed without
// forcing it (dlq.Options.Force).
func (d *DeadLetter) Replayable() bool { return d.ReplayedAt == nil && d.TaskID != nil }

// DeadLetterFilter selects dead letters for DeadLetters.
type DeadLetterFilter struct {
	// Step keeps only this step ("" for all).
	Step string
	// Since keeps only dead letters that failed at or after it (zero: all).
	Since time.Time
	// Pending keeps only those not replayed yet.
	Pending bool
	// Limit bounds the result (0: 100).
	Limit int
	// Project, when not "", keeps the dead letters of that project's
	// tasks (a project's token's list).
	Project string
}

const deadLetterColumns = `id, message_id, task_id, step, part, attempt, error_class, failure_reason, routing_key, source,
	failed_at, recorded_at, replayed_at, replay_count`

func scanDeadLetter(row pgx.Row, d *DeadLetter, extra ...any) error {
	return row.Scan(append([]any{&d.ID, &d.MessageID, &d.TaskID, &d.Step, &d.Part, &d.Attempt, &d.ErrorClass,
		&d.FailureReason, &d.RoutingKey, &d.Source, &d.FailedAt, &d.RecordedAt, &d.ReplayedAt, &d.ReplayCount},
		extra...)...)
}

// DeadLetters returns the dead letters f selects, newest first, without
// their messages.
func DeadLetters(ctx context.Context, q store.Querier, f DeadLetterFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var since *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	rows, err := q.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters
		WHERE ($1 = '' OR step = $1) AND ($2::timestamptz IS NULL OR failed_at >= $2)
		  AND (NOT $3 OR replayed_at IS NULL)
		  AND ($5 = '' OR task_id IN (SELECT t.id FROM tasks t WHERE t.project = $5))
		ORDER BY failed_at DESC, id DESC LIMIT $4`, f.Step, since, f.Pending, f.Limit, f.Project)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		return d, scanDeadLetter(row, &d)
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// GetDeadLetter reads one dead letter with its original message and raw
// body; a missing one is dlq.ErrNotFound.
func GetDeadLetter(ctx context.Context, q store.Querier, id int64) (*DeadLetter, error) {
	var d DeadLetter
	var orig []byte
	err := scanDeadLetter(q.QueryRow(ctx, `SELECT `+deadLetterColumns+`, original_message, raw_body FROM dead_letters WHERE id = $1`, id),
		&d, &orig, &d.RawBody)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("dead letter %d: %w", id, deadletter.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	if orig != nil {
		d.OriginalMessage = orig
	}
	return &d, nil
}

// deadLettersOfTask reads a task's latest dead letters, without their
// messages.
func deadLettersOfTask(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]DeadLetter, error) {
	rows, err := tx.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE task_id = $1
		ORDER BY failed_at DESC, id DESC LIMIT 100`, id)
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		return d, scanDeadLetter(row, &d)
	})
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", id, err)
	}
	return out, nil
}
