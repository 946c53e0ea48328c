// Package dlq replays the dead letters the dlq_recorder stored (pkg/view
// reads them for the doors): the original message is published again with a fresh retry budget
// (replay.Step: the next unused attempt number, earlier attempts kept in
// the step attempts as history), the dead letter is marked replayed so that it is
// not replayed twice by accident, and a failed task runs again.
package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/deadletter"
	"github.com/dubflow/dubflow/pkg/internal/replay"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors Replay returns for dead letters it will not replay.
var (
	// ErrNotFound: no dead letter has the id (pkg/view's GetDeadLetter
	// says the same).
	ErrNotFound = deadletter.ErrNotFound
	// ErrReplayed: the dead letter was replayed before (use Force).
	ErrReplayed = errors.New("dead letter already replayed")
	// ErrNotReplayable: its original message is not a valid task message.
	ErrNotReplayable = errors.New("dead letter cannot be replayed")
	// ErrTaskDone: its task finished since; nothing to re-run.
	ErrTaskDone = errors.New("task is done")
)

// Replayed describes one replay, in the read model's JSON: what POST
// /api/dead-letters/{id}/replay answers and `dubctl dlq replay --json` lists.
type Replayed struct {
	// ID is the dead letter replayed.
	ID     int64     `json:"id"`
	TaskID uuid.UUID `json:"taskId"`
	Step   string    `json:"step"`
	Part   string    `json:"part"`
	// Attempt is the attempt number of the republished message, the base of
	// its fresh retry budget; 0 when the dead letter was only marked
	// replayed because another dead letter of the same part was replayed in
	// the same run.
	Attempt int `json:"attempt"`
}

// Publisher publishes one message with the broker's confirm.
type Publisher = outbox.Publisher

// Options tune Replay.
type Options struct {
	// Force replays a dead letter that was replayed before.
	Force bool
}

// Replay republishes the original message of dead letter id with a fresh
// retry budget, marks the dead letter replayed and sets its failed task
// running again, in one transaction; then it publishes the message.
func Replay(ctx context.Context, pool *pgxpool.Pool, pub Publisher, id int64, opts Options) (Replayed, error) {
	var out Replayed
	err := outbox.Commit(ctx, pool, pub, func(tx pgx.Tx) ([]int64, error) {
		var ids []int64
		var err error
		out, ids, err = replayTx(ctx, tx, id, opts)
		return ids, err
	})
	switch {
	case errors.Is(err, outbox.ErrUnpublished):
		return out, fmt.Errorf("dead letter %d replayed: %w", id, err)
	case err != nil:
		return Replayed{}, err
	}
	return out, nil
}

// replayTx stages the replay of dead letter id in tx and returns the outbox
// rows to publish after the commit: the message, and the task's
// event.task.retried when it was failed.
func replayTx(ctx context.Context, tx pgx.Tx, id int64, opts Options) (Replayed, []int64, error) {
	var replayedAt *time.Time
	var orig []byte
	err := tx.QueryRow(ctx, `SELECT replayed_at, original_message FROM dead_letters WHERE id = $1 FOR UPDATE`, id).
		Scan(&replayedAt, &orig)
	if errors.Is(err, pgx.ErrNoRows) {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Replayed{}, nil, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	if replayedAt != nil && !opts.Force {
		return Replayed{}, nil, fmt.Errorf("dead letter %d (replayed at %s; a forced replay runs it again): %w",
			id, replayedAt.Format(time.RFC3339), ErrReplayed)
	}
	if orig == nil {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: original message is not JSON: %w", id, ErrNotReplayable)
	}
	env, err := wire.Decode(orig)
	if err != nil {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: original message: %v: %w", id, err, ErrNotReplayable)
	}
	part, err := env.Part()
	if err != nil {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: %v: %w", id, err, ErrNotReplayable)
	}
	status, err := task.LockStatus(ctx, tx, env.TaskID)
	if errors.Is(err, task.ErrNotFound) {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: task %s does not exist: %w", id, env.TaskID, ErrNotReplayable)
	}
	if err != nil {
		return Replayed{}, nil, err
	}
	if status == "done" {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: task %s: %w", id, env.TaskID, ErrTaskDone)
	}
	fresh, msgID, err := replay.Step(ctx, tx, env, fmt.Sprintf("dlq replay of dead letter %d", id))
	if err != nil {
		return Replayed{}, nil, err
	}
	if err := markReplayed(ctx, tx, `id = $1`, id); err != nil {
		return Replayed{}, nil, fmt.Errorf("mark dead letter %d replayed: %w", id, err)
	}
	res, err := task.Apply(ctx, tx, task.Retry(task.RefOf(env)))
	if err != nil {
		return Replayed{}, nil, fmt.Errorf("set task %s running: %w", env.TaskID, err)
	}
	ids := []int64{msgID}
	if res.EventID != 0 {
		ids = append(ids, res.EventID)
	}
	return Replayed{ID: id, TaskID: env.TaskID, Step: env.Step, Part: part, Attempt: fresh.Attempt}, ids, nil
}

// ReplayAll replays every dead letter not replayed yet (of one step when
// stepName is not empty), oldest first. Several dead letters of the same
// part of a task (a worker's and the broker's, say) are replayed once; the
// others are marked replayed with it. Dead letters that cannot be replayed
// are reported in the joined error and left as they are.
func ReplayAll(ctx context.Context, pool *pgxpool.Pool, pub Publisher, stepName string) ([]Replayed, error) {
	return ReplayMatching(ctx, pool, pub, Match{Step: stepName})
}

// replayIDs replays the dead letters ids in order, each part once (see
// ReplayAll).
func replayIDs(ctx context.Context, pool *pgxpool.Pool, pub Publisher, ids []int64) ([]Replayed, error) {
	done := map[partID]bool{}
	var out []Replayed
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		orig, err := original(ctx, pool, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if k, ok := partKey(orig); ok && done[k] {
			if err := markReplayed(ctx, pool, `id = $1 AND replayed_at IS NULL`, id); err != nil {
				errs = append(errs, fmt.Errorf("mark dead letter %d replayed: %w", id, err))
				continue
			}
			out = append(out, Replayed{ID: id, TaskID: k.task, Step: k.step, Part: k.part})
			continue
		}
		r, err := Replay(ctx, pool, pub, id, Options{})
		if errors.Is(err, ErrReplayed) {
			continue // another operator's run got there first
		}
		if err != nil && r.Attempt == 0 {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
		done[partID{r.TaskID, r.Step, r.Part}] = true
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// partID names one part of one step of a task.
type partID struct {
	task       uuid.UUID
	step, part string
}

// original reads the original message of dead letter id (nil when it was
// not JSON).
func original(ctx context.Context, q store.Querier, id int64) ([]byte, error) {
	var orig []byte
	err := q.QueryRow(ctx, `SELECT original_message FROM dead_letters WHERE id = $1`, id).Scan(&orig)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	return orig, nil
}

// partKey names the part an original message is of.
func partKey(orig []byte) (partID, bool) {
	if orig == nil {
		return partID{}, false
	}
	env, err := wire.Decode(orig)
	if err != nil {
		return partID{}, false
	}
	part, err := env.Part()
	if err != nil {
		return partID{}, false
	}
	return partID{env.TaskID, env.Step, part}, true
}

// ParseSince reads a since value (dubctl's --since, the console's ?since=):
// an RFC 3339 time, a date (2006-01-02) or a duration back from now (90m,
// 2h, 7d). Its error names the value as "since", the word both doors use.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && n >= 0 && fmt.Sprint(n) == days {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q: want an RFC 3339 time, a date or a duration such as 2h or 7d", s)
}

// markReplayed marks the dead letters where holds replayed once more.
func markReplayed(ctx context.Context, q store.Querier, where string, args ...any) error {
	return deadletter.MarkReplayed(ctx, q, where, args...)
}

// MarkStepReplayed marks, in tx, the dead letters of the task's step not
// replayed yet as replayed: the step runs again from its parts' messages
// (a retry of the task), not from each dead letter.
func MarkStepReplayed(ctx context.Context, tx pgx.Tx, taskID uuid.UUID, stepName string) error {
	if err := markReplayed(ctx, tx, `task_id = $1 AND step = $2 AND replayed_at IS NULL`, taskID, stepName); err != nil {
		return fmt.Errorf("mark dead letters of %s replayed: %w", taskID, err)
	}
	return nil
}
