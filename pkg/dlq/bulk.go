package dlq

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Match selects dead letters for a bulk replay or purge. Zero fields
// match every dead letter.
type Match struct {
	// Step and ErrorClass keep only dead letters of this step, of this
	// error class.
	Step, ErrorClass string
	// Since and Until keep only those that failed in [Since, Until).
	Since, Until time.Time
	// Pending keeps only those not replayed yet.
	Pending bool
}

// where is m as a condition on dead_letters ($1..$5, args gives them).
const where = `($1 = '' OR step = $1) AND ($2 = '' OR error_class = $2)
	AND ($3::timestamptz IS NULL OR failed_at >= $3) AND ($4::timestamptz IS NULL OR failed_at < $4)
	AND (NOT $5 OR replayed_at IS NULL)`

func (m Match) args() []any {
	var since, until *time.Time
	if !m.Since.IsZero() {
		since = &m.Since
	}
	if !m.Until.IsZero() {
		until = &m.Until
	}
	return []any{m.Step, m.ErrorClass, since, until, m.Pending}
}

// Count returns how many dead letters m matches, and how many of those a
// replay would republish (pending, with a task).
func Count(ctx context.Context, q store.Querier, m Match) (matched, replayable int, err error) {
	err = q.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE replayed_at IS NULL AND task_id IS NOT NULL)
		FROM dead_letters WHERE `+where, m.args()...).Scan(&matched, &replayable)
	if err != nil {
		return 0, 0, fmt.Errorf("count dead letters: %w", err)
	}
	return matched, replayable, nil
}

// ReplayMatching replays every dead letter m matches that was not replayed
// yet and has a task, oldest first, each part once (as ReplayAll does).
func ReplayMatching(ctx context.Context, pool *pgxpool.Pool, pub Publisher, m Match) ([]Replayed, error) {
	rows, err := pool.Query(ctx, `SELECT id FROM dead_letters
		WHERE replayed_at IS NULL AND task_id IS NOT NULL AND `+where+` ORDER BY id`, m.args()...)
	if err != nil {
		return nil, fmt.Errorf("list dead letters to replay: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list dead letters to replay: %w", err)
	}
	return replayIDs(ctx, pool, pub, ids)
}

// Purge deletes every dead letter m matches and keeps each, as it was, in
// dead_letters_archive with the time and by (who purged), in one
// statement. It returns the ids purged.
func Purge(ctx context.Context, q store.Querier, m Match, by string) ([]int64, error) {
	rows, err := q.Query(ctx, `WITH gone AS (DELETE FROM dead_letters WHERE `+where+` RETURNING *)
		INSERT INTO dead_letters_archive (id, message_id, task_id, step, part, attempt, error_class, failure_reason,
			original_message, raw_body, routing_key, source, failed_at, recorded_at, replayed_at, replay_count, purged_by)
		SELECT id, message_id, task_id, step, part, attempt, error_class, failure_reason, original_message, raw_body,
			routing_key, source, failed_at, recorded_at, replayed_at, replay_count, $6 FROM gone
		RETURNING id`, append(m.args(), by)...)
	if err != nil {
		return nil, fmt.Errorf("purge dead letters: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("purge dead letters: %w", err)
	}
	return ids, nil
}
