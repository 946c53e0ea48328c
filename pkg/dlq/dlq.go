// Package dlq reads the dead letters the dlq_recorder stored and replays
// them: the original message is published again with a fresh retry budget
// (step.Replay: the next unused attempt number, earlier attempts kept in
// the step attempts as history), the dead letter is marked replayed so that it is
// not replayed twice by accident, and a failed task runs again.
package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors Replay returns for dead letters it will not replay.
var (
	// ErrNotFound: no dead letter has the id.
	ErrNotFound = errors.New("dead letter not found")
	// ErrReplayed: the dead letter was replayed before (use Force).
	ErrReplayed = errors.New("dead letter already replayed")
	// ErrNotReplayable: its original message is not a valid task message.
	ErrNotReplayable = errors.New("dead letter cannot be replayed")
	// ErrTaskDone: its task finished since; nothing to re-run.
	ErrTaskDone = errors.New("task is done")
)

// DeadLetter is one recorded dead letter, in the read model's JSON (the
// console's camelCase): an item of GET /api/dead-letters, of a task's
// deadLetters and of `dubctl dlq list --json` (pkg/view's DeadLetter).
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
	// OriginalMessage is the failed message (Get only; null when it was not
	// JSON).
	OriginalMessage json.RawMessage `json:"originalMessage,omitempty"`
	// RawBody is the delivery as received (Get only); the API does not
	// show it.
	RawBody []byte `json:"-"`
}

// Replayable reports whether the dead letter can be replayed without Force.
func (d *DeadLetter) Replayable() bool { return d.ReplayedAt == nil && d.TaskID != nil }

// Filter selects dead letters for List.
type Filter struct {
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

const columns = `id, message_id, task_id, step, part, attempt, error_class, failure_reason, routing_key, source,
	failed_at, recorded_at, replayed_at, replay_count`

func scan(row pgx.Row, d *DeadLetter, extra ...any) error {
	return row.Scan(append([]any{&d.ID, &d.MessageID, &d.TaskID, &d.Step, &d.Part, &d.Attempt, &d.ErrorClass,
		&d.FailureReason, &d.RoutingKey, &d.Source, &d.FailedAt, &d.RecordedAt, &d.ReplayedAt, &d.ReplayCount},
		extra...)...)
}

// List returns the dead letters f selects, newest first.
func List(ctx context.Context, q store.Querier, f Filter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var since *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM dead_letters
		WHERE ($1 = '' OR step = $1) AND ($2::timestamptz IS NULL OR failed_at >= $2)
		  AND (NOT $3 OR replayed_at IS NULL)
		  AND ($5 = '' OR task_id IN (SELECT t.id FROM tasks t WHERE t.project = $5))
		ORDER BY failed_at DESC, id DESC LIMIT $4`, f.Step, since, f.Pending, f.Limit, f.Project)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		return d, scan(row, &d)
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// Get returns one dead letter with its original message and raw body.
func Get(ctx context.Context, q store.Querier, id int64) (*DeadLetter, error) {
	var d DeadLetter
	var orig []byte
	err := scan(q.QueryRow(ctx, `SELECT `+columns+`, original_message, raw_body FROM dead_letters WHERE id = $1`, id),
		&d, &orig, &d.RawBody)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	if orig != nil {
		d.OriginalMessage = orig
	}
	return &d, nil
}

// Replayed describes one replay, in the read model's JSON: what POST
// /api/dead-letters/{id}/replay answers and `dubctl dlq replay --json` lists
// (pkg/view's Replayed).
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
	var ids []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		out, ids, err = replay(ctx, tx, id, opts)
		return err
	})
	if err != nil {
		return Replayed{}, err
	}
	if err := outbox.Flush(ctx, pool, pub, ids); err != nil {
		return out, fmt.Errorf("dead letter %d replayed, but its message waits in the outbox for a sweep: %w", id, err)
	}
	return out, nil
}

// replay stages the replay of dead letter id in tx and returns the outbox
// rows to publish after the commit: the message, and the task's
// event.task.retried when it was failed.
func replay(ctx context.Context, tx pgx.Tx, id int64, opts Options) (Replayed, []int64, error) {
	var d DeadLetter
	var orig []byte
	err := scan(tx.QueryRow(ctx, `SELECT `+columns+`, original_message FROM dead_letters WHERE id = $1 FOR UPDATE`, id),
		&d, &orig)
	if errors.Is(err, pgx.ErrNoRows) {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Replayed{}, nil, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	if d.ReplayedAt != nil && !opts.Force {
		return Replayed{}, nil, fmt.Errorf("dead letter %d (replayed at %s; a forced replay runs it again): %w",
			id, d.ReplayedAt.Format(time.RFC3339), ErrReplayed)
	}
	if orig == nil {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: original message is not JSON: %w", id, ErrNotReplayable)
	}
	env, err := wire.Decode(orig)
	if err != nil {
		return Replayed{}, nil, fmt.Errorf("dead letter %d: original message: %v: %w", id, err, ErrNotReplayable)
	}
	part, err := step.PartOf(env)
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
	fresh, msgID, err := step.Replay(ctx, tx, env, fmt.Sprintf("dlq replay of dead letter %d", id))
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
		d, err := Get(ctx, pool, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if k, ok := partKey(d); ok && done[k] {
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

func partKey(d *DeadLetter) (partID, bool) {
	if d.OriginalMessage == nil {
		return partID{}, false
	}
	env, err := wire.Decode(d.OriginalMessage)
	if err != nil {
		return partID{}, false
	}
	part, err := step.PartOf(env)
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
	_, err := q.Exec(ctx, `UPDATE dead_letters SET replayed_at = now(), replay_count = replay_count + 1
		WHERE `+where, args...)
	return err
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
