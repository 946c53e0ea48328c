// Package outboxrow is the one writer of the outbox table: the statements
// that add a message (Insert, and InsertFrom for the statements of pkg/task
// and pkg/internal/attempt that add the message of the change they make in
// the same statement), that record a refused publish (Fail), hold a row
// back from the sweeps (HoldBack) and delete published rows (Delete).
// pkg/outbox is the door (Add, Commit, Sweep, Flush) and the step runtime's
// relay (pkg/internal/relay) publishes what a step committed; both write
// through here. It knows nothing of the wire contract and depends on no
// dubflow package, so that the owners of other tables, low in the import
// graph, can add their messages through it.
package outboxrow

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Insert adds a message to the outbox and returns its row id (arguments:
// message id, exchange, routing key, body).
const Insert = `INSERT INTO outbox (message_id, exchange, routing_key, body) VALUES ($1, $2, $3, $4) RETURNING id`

// InsertFrom begins a statement, or a statement's CTE, that adds to the
// outbox the rows of the SELECT that follows it (columns: message id,
// exchange, routing key, body).
const InsertFrom = `INSERT INTO outbox (message_id, exchange, routing_key, body)`

// Execer runs a statement: a transaction, a connection or a pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Fail records that the broker refused row id (reason, cleaned by the
// caller): its failures counted, and the row paused before the next try
// for a time growing with them, at most a minute.
func Fail(ctx context.Context, db Execer, id int64, reason string) error {
	if _, err := db.Exec(ctx, `UPDATE outbox SET failures = failures + 1, last_error = $2,
				next_try_at = now() + least(interval '1 second' * power(2, least(failures, 6)), interval '1 minute')
			WHERE id = $1`, id, reason); err != nil {
		return fmt.Errorf("record outbox row %d failure: %w", id, err)
	}
	return nil
}

// HoldBack keeps row id from every process's sweep for d (its
// next_try_at, which the sweeps respect).
func HoldBack(ctx context.Context, db Execer, id int64, d time.Duration) error {
	if _, err := db.Exec(ctx, `UPDATE outbox SET next_try_at = now() + $2::interval WHERE id = $1`, id, d); err != nil {
		return fmt.Errorf("hold outbox row %d back: %w", id, err)
	}
	return nil
}

// Delete deletes the rows ids (published, or moved to the dead letters).
func Delete(ctx context.Context, db Execer, ids []int64) error {
	if _, err := db.Exec(ctx, `DELETE FROM outbox WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("delete outbox rows: %w", err)
	}
	return nil
}
