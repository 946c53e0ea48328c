// Package replay stages a new run of a step with a fresh retry budget: the
// message gets the next unused attempt number of its part, that attempt is
// recorded as the base of a new budget (step_replays, this package's table
// alone), and the message goes to the outbox. The dead-letter replays
// (pkg/dlq), the compensation re-drives (pkg/compensation) and the
// operators' retries (pkg/retry) call it here, below the step runtime;
// services reach it through pkg/step (step.Replay).
package replay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Step stages, inside tx, a new run of env's step with a fresh retry
// budget: the message gets the next unused attempt number of its part, that
// attempt is recorded as the base of a new budget (step_replays), and the
// message is added to the outbox. Earlier attempts stay recorded as
// history. Commit tx and publish the returned outbox id (outbox.Commit) or
// leave it to a sweep.
func Step(ctx context.Context, tx pgx.Tx, env *wire.Envelope, reason string) (*wire.Envelope, int64, error) {
	part, err := env.Part()
	if err != nil {
		return nil, 0, fault.Permanent(err)
	}
	next, err := attempt.NextAttempt(ctx, tx, env.TaskID, env.Step, part)
	if err != nil {
		return nil, 0, fmt.Errorf("replay %s/%s: %w", env.TaskID, env.Step, err)
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
	o := outbox.New(wire.Exchange, wire.RoutingKey(env.Step), body)
	if err := outbox.Add(ctx, tx, o); err != nil {
		return nil, 0, err
	}
	return fresh, o.ID, nil
}

// Unfinished returns the message of each part of the task's step without a
// success, to re-drive it from: the one its latest attempt ran from, or the
// one registered when the step was fanned out
// (attempt.UnfinishedMessages). A part with neither, or one that does not
// decode, is left out.
func Unfinished(ctx context.Context, q attempt.Reader, task uuid.UUID, step string) ([]*wire.Envelope, error) {
	bodies, err := attempt.UnfinishedMessages(ctx, q, task, step)
	if err != nil {
		return nil, err
	}
	var envs []*wire.Envelope
	for _, b := range bodies {
		if b == nil {
			continue
		}
		if env, err := wire.Decode(b); err == nil {
			envs = append(envs, env)
		}
	}
	return envs, nil
}
