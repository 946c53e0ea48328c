package step

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Replay stages, inside tx, a new run of env's step with a fresh retry
// budget: the message gets the next unused attempt number of its part, that
// attempt is recorded as the base of a new budget (step_replays), and the
// message is added to the outbox. Earlier attempts stay in task_steps as
// history. Commit tx, then Flush the returned outbox id (or leave it to a
// worker's outbox sweep).
func Replay(ctx context.Context, tx pgx.Tx, env *wire.Envelope, reason string) (*wire.Envelope, int64, error) {
	part, err := PartOf(env)
	if err != nil {
		return nil, 0, err
	}
	var next int
	if err := tx.QueryRow(ctx, `SELECT greatest(
			(SELECT coalesce(max(attempt), 0) FROM task_steps WHERE task_id = $1 AND step = $2 AND part = $3),
			(SELECT coalesce(max(base_attempt), 0) FROM step_replays WHERE task_id = $1 AND step = $2 AND part = $3)) + 1`,
		env.TaskID, env.Step, part).Scan(&next); err != nil {
		return nil, 0, fmt.Errorf("replay %s/%s: next attempt: %w", env.TaskID, env.Step, err)
	}
	next = max(next, env.Attempt+1)
	if _, err := tx.Exec(ctx, `INSERT INTO step_replays (task_id, step, part, base_attempt, reason)
		VALUES ($1, $2, $3, $4, $5)`, env.TaskID, env.Step, part, next, reason); err != nil {
		return nil, 0, fmt.Errorf("replay %s/%s: record: %w", env.TaskID, env.Step, err)
	}
	fresh, err := wire.New(env.Step, env.TaskID, env.TraceID, env.Payload)
	if err != nil {
		return nil, 0, fmt.Errorf("replay %s/%s: %w", env.TaskID, env.Step, err)
	}
	fresh.Attempt = next
	body, err := json.Marshal(fresh)
	if err != nil {
		return nil, 0, fmt.Errorf("replay %s/%s: encode: %w", env.TaskID, env.Step, err)
	}
	id, err := store.AddOutbox(ctx, tx, wire.Exchange, wire.RoutingKey(env.Step), body)
	if err != nil {
		return nil, 0, err
	}
	return fresh, id, nil
}

// Flush publishes the given outbox rows now, each confirmed, and deletes
// them; rows another process is publishing at the same moment are skipped.
// Tools that write to the outbox (replays, requeues) call it after their
// commit so they do not wait for a worker's sweep.
func Flush(ctx context.Context, pool *pgxpool.Pool, pub Publisher, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	var perr error
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		_, perr, err = publishLocked(ctx, tx, pub, `SELECT id, message_id, exchange, routing_key, body FROM outbox
			WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids)
		return err
	})
	if err != nil {
		return err
	}
	return perr
}
