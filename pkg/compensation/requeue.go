// Package compensation re-drives the speech synthesis of tasks whose
// segments still lack audio after the tts step's retries (tasks waiting in
// compensating): one tts message per task, with a fresh retry budget.
// tts_requeue and the console's compensation API share it. It is the one
// writer of tts_compensations: the dead-letter recorder records the
// compensation messages through Record, a re-drive marks them requeued.
package compensation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/internal/replay"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Task is a task whose synthesis tts_requeue re-drives (or would).
type Task struct {
	TaskID  uuid.UUID `json:"task_id"`
	Status  string    `json:"status"`
	Missing []int     `json:"missing_segments"`
	// Attempt is the tts attempt published (0 in a dry run).
	Attempt int `json:"attempt,omitempty"`
}

// Options select and bound one pass.
type Options struct {
	// Limit is the most tasks one pass re-drives.
	Limit int
	// Running also takes running tasks with segments lacking audio whose tts
	// step is neither running nor done and that made no progress for
	// MinIdle. Off by default: the reconciler re-drives a running task's
	// lost tts message on its own, and only when the message is really
	// gone, not waiting in task.tts behind a backlog.
	Running bool
	// Project, when not "", keeps to that project's tasks (a project's
	// token's pass).
	Project string
	// MinIdle spares running tasks that made progress more recently (with
	// Running).
	MinIdle time.Duration
	// DryRun lists the tasks without re-driving them.
	DryRun bool
}

// candidatesSQL selects, and locks (SKIP LOCKED: concurrent passes share
// the work), tasks past translation whose tts step is neither running nor
// done (every part succeeded: a re-dub's part v<n> is one of them): every compensating task (one whose segments all have audio now,
// after dubctl redub, say, moves on to mux_video), and with $3 running
// tasks idle for $2 with segments lacking audio.
var candidatesSQL = `SELECT t.id, t.status, t.trace_id, t.speaker_id, ` + task.MissingAudioSQL + ` AS missing
  FROM tasks t
 WHERE (t.status = 'compensating'
        OR ($3 AND t.status = 'running' AND t.updated_at < now() - $2::interval
            AND EXISTS (SELECT 1 FROM segments s WHERE ` + task.LacksAudioSQL + `)))
   AND NOT step_succeeded(t.id, 'tts')
   AND NOT ` + attempt.HeldSQL("t.id", "'tts'") + `
   AND step_succeeded(t.id, 'translate')
   AND ($4 = '' OR t.project = $4)
 ORDER BY t.updated_at, t.id
 LIMIT $1
 FOR UPDATE OF t SKIP LOCKED`

// Requeue runs one pass: in one transaction it re-drives up to opts.Limit
// tasks (replay.Step of their tts message: next attempt, fresh retry
// budget, history kept), sets compensating tasks running and marks their
// compensations requeued; after the commit it publishes the messages.
func Requeue(ctx context.Context, pool *pgxpool.Pool, pub outbox.Publisher, opts Options) ([]Task, error) {
	var tasks []Task
	err := outbox.Commit(ctx, pool, pub, func(tx pgx.Tx) ([]int64, error) {
		cands, err := findCandidates(ctx, tx, opts)
		if err != nil {
			return nil, err
		}
		var ids []int64
		for _, c := range cands {
			if opts.DryRun {
				tasks = append(tasks, c.Task)
				continue
			}
			staged, err := redrive(ctx, tx, &c)
			if err != nil {
				return nil, err
			}
			tasks = append(tasks, c.Task)
			ids = append(ids, staged...)
		}
		if opts.DryRun {
			return nil, errDryRun
		}
		return ids, nil
	})
	switch {
	case errors.Is(err, outbox.ErrUnpublished):
		return tasks, fmt.Errorf("re-drive: %w", err)
	case err != nil && !errors.Is(err, errDryRun):
		return nil, err
	}
	return tasks, nil
}

// candidate is a task to re-drive and what its message is built from.
type candidate struct {
	Task
	trace, speaker string
}

// findCandidates locks up to opts.Limit tasks to re-drive (candidatesSQL).
func findCandidates(ctx context.Context, tx pgx.Tx, opts Options) ([]candidate, error) {
	rows, err := tx.Query(ctx, candidatesSQL, opts.Limit, opts.MinIdle, opts.Running, opts.Project)
	if err != nil {
		return nil, fmt.Errorf("find tasks missing tts audio: %w", err)
	}
	cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (candidate, error) {
		var c candidate
		var missing []int32
		err := row.Scan(&c.TaskID, &c.Status, &c.trace, &c.speaker, &missing)
		for _, m := range missing {
			c.Missing = append(c.Missing, int(m))
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("find tasks missing tts audio: %w", err)
	}
	return cands, nil
}

// redrive stages the replay of c's tts message, resumes the task and marks
// its compensations requeued, inside tx. It sets c.Attempt and returns the
// outbox ids to publish after the commit.
func redrive(ctx context.Context, tx pgx.Tx, c *candidate) ([]int64, error) {
	attempt, ids, err := redriveTTS(ctx, tx, c.TaskID, c.trace, c.speaker, "",
		fmt.Sprintf("%s %d segments without audio", RequeueReasonPrefix, len(c.Missing)))
	c.Attempt = attempt
	return ids, err
}

// Redrive re-drives, inside tx, the speech synthesis of the task id (one
// that is compensating: an operator's retry) as Requeue does — the task's
// tts message replayed with a fresh retry budget, the task running again,
// its compensations marked requeued — with speaker as the message's voice
// when it is not "" (the task row's speaker is the caller's to change), and
// reason recorded with the replay. It returns the attempt published and
// the outbox ids to publish after the commit.
func Redrive(ctx context.Context, tx pgx.Tx, id uuid.UUID, speaker, reason string) (int, []int64, error) {
	var trace, current string
	if err := tx.QueryRow(ctx, `SELECT trace_id, speaker_id FROM tasks WHERE id = $1`, id).Scan(&trace, &current); err != nil {
		return 0, nil, fmt.Errorf("read task %s: %w", id, err)
	}
	return redriveTTS(ctx, tx, id, trace, current, speaker, reason)
}

// redriveTTS stages the replay of the task's tts message (with voice, when
// not "", as its speaker), resumes the task and marks its compensations
// requeued, inside tx.
func redriveTTS(ctx context.Context, tx pgx.Tx, id uuid.UUID, trace, speaker, voice, reason string) (int, []int64, error) {
	env, err := ttsMessage(ctx, tx, id, trace, speaker)
	if err != nil {
		return 0, nil, err
	}
	if voice != "" {
		if env, err = withSpeaker(env, voice); err != nil {
			return 0, nil, err
		}
	}
	fresh, msgID, err := replay.Step(ctx, tx, env, reason)
	if err != nil {
		return 0, nil, err
	}
	res, err := task.Apply(ctx, tx, task.Resume(task.Ref{ID: id, Step: wire.StepTTS, Trace: trace}))
	if err != nil {
		return 0, nil, fmt.Errorf("set task %s running: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE tts_compensations SET requeued_at = now()
		WHERE task_id = $1 AND requeued_at IS NULL`, id); err != nil {
		return 0, nil, fmt.Errorf("mark compensations of %s requeued: %w", id, err)
	}
	ids := []int64{msgID}
	if res.EventID != 0 {
		ids = append(ids, res.EventID)
	}
	return fresh.Attempt, ids, nil
}

// withSpeaker returns the tts message env with speaker as its voice.
func withSpeaker(env *wire.Envelope, speaker string) (*wire.Envelope, error) {
	var p wire.TTS
	if err := env.UnmarshalPayload(&p); err != nil {
		return nil, fmt.Errorf("read tts message of %s: %w", env.TaskID, err)
	}
	p.SpeakerID = speaker
	out, err := wire.New(wire.StepTTS, env.TaskID, env.TraceID, p)
	if err != nil {
		return nil, fmt.Errorf("build tts message of %s: %w", env.TaskID, err)
	}
	out.Attempt = env.Attempt
	return out, nil
}

// RequeueReasonPrefix starts the reason of every replay of a task's tts
// step that Requeue records (step_replays): Requeues counts them.
const RequeueReasonPrefix = "tts_requeue:"

// RetryReasonPrefix starts the reason of an operator's retry of a task
// (pkg/retry): the requeues of its speech synthesis are counted again from
// there.
const RetryReasonPrefix = "retry"

// Requeues counts the re-drives of the task's speech synthesis (Requeue)
// since an operator last retried it: the tts worker fails a task whose
// synthesis still fails after TTS_MAX_REQUEUES of them, rather than
// setting it compensating again.
func Requeues(ctx context.Context, q store.Querier, taskID uuid.UUID) (int, error) {
	return attempt.CountReplays(ctx, q, taskID, wire.StepTTS, RequeueReasonPrefix, RetryReasonPrefix)
}

// errDryRun rolls back a dry run's transaction.
var errDryRun = errors.New("dry run")

// ttsMessage returns the task's tts message to replay: the one its last
// tts attempt ran from (of any part: a re-dub's version v<n> is one; a
// translate batch's part becomes the message of the whole task), or, if
// tts never ran, one built from the task row.
// Its attempt accounts for replays not claimed yet, so that replay.Step
// numbers the new attempt after them.
func ttsMessage(ctx context.Context, tx pgx.Tx, taskID uuid.UUID, trace, speaker string) (*wire.Envelope, error) {
	body, err := attempt.LastMessage(ctx, tx, taskID, wire.StepTTS)
	if err != nil {
		return nil, err
	}
	var env *wire.Envelope
	if body != nil {
		env, _ = wire.Decode(body)
	}
	if env != nil {
		// A part of the step (a translate batch's segments) is re-driven as
		// the whole task: every segment without audio, every part covered.
		var p wire.TTS
		if env.UnmarshalPayload(&p) == nil && len(p.SegmentIDs) > 0 {
			p.SegmentIDs = nil
			whole, err := wire.New(wire.StepTTS, taskID, env.TraceID, p)
			if err != nil {
				return nil, fmt.Errorf("build tts message of %s: %w", taskID, err)
			}
			env = whole
		}
	}
	if env == nil {
		if env, err = wire.New(wire.StepTTS, taskID, trace, wire.TTS{TaskID: taskID, SpeakerID: speaker}); err != nil {
			return nil, fmt.Errorf("build tts message of %s: %w", taskID, err)
		}
	}
	return env, nil
}
