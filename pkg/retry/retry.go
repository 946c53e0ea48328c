// Package retry runs a task again for an operator: a failed or cancelled
// task from its first step that has not succeeded, a compensating task's
// speech synthesis — either with another voice if asked. The console's
// POST /api/tasks/{id}/retry and `dubctl retry` (both modes) call Task
// inside outbox.Commit's transaction, which publishes the outbox rows it
// returns after the commit.
package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/internal/replay"
	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Options are what an operator asks of a retry.
type Options struct {
	// Speaker, when not "", is the voice the task is dubbed with from now
	// on: checked as at submit (admit.Speaker, by the voices tts
	// announced), recorded on the task (and a parent's retried children),
	// given to the replayed extract_audio or tts message, and to the
	// segments that spoke with the task's former voice and have no audio
	// yet. A task whose speech was synthesized already cannot change it
	// (a redub can, line by line).
	Speaker string
	// By names who retries ("console", "dubctl"), in the replay's reason.
	By string
}

// Part is one part a retry published again; TaskID names the child task
// it belongs to when a parent was retried.
type Part struct {
	TaskID  *uuid.UUID `json:"taskId,omitempty"`
	Step    string     `json:"step"`
	Part    string     `json:"part"`
	Attempt int        `json:"attempt"`
}

// Retried is what Task did.
type Retried struct {
	TaskID uuid.UUID `json:"taskId"`
	// Status is the task's status after the retry (running).
	Status string `json:"status"`
	// Speaker is the task's voice after the retry ("" for the engine's
	// default).
	Speaker  string `json:"speaker"`
	Replayed []Part `json:"replayed"`
	// Outbox are the rows to publish after the commit (outbox.Commit); what
	// is not published waits for the workers' sweep.
	Outbox []int64 `json:"-"`
}

// ErrRefused matches every *RefusedError.
var ErrRefused = errors.New("retry refused")

// RefusedError says why a task cannot be retried (HTTP 409): its status,
// nothing left to run, no message to run it from.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Beginner starts a transaction: a *pgxpool.Pool.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Task retries the task id in one transaction:
//
//   - failed or cancelled: the first pipeline step that has not succeeded
//     publishes each of its unfinished parts again with a fresh retry
//     budget (replay.Step; earlier attempts stay as history), the step's
//     dead letters are marked replayed, and the task runs again
//     (task.Retry);
//   - compensating: its speech synthesis is re-driven as tts_requeue does
//     (compensation.Redrive), and the count of requeues starts again;
//   - a parent whose children were spawned: each failed or cancelled child
//     is retried so, and the parent runs again until they end.
//
// Any other status is a *RefusedError; a task that does not exist
// task.ErrNotFound; a speaker that is no announced voice an *admit.Error.
func Task(ctx context.Context, db Beginner, id uuid.UUID, opts Options) (Retried, error) {
	out := &Retried{TaskID: id, Replayed: []Part{}}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		out.Replayed, out.Outbox = []Part{}, nil
		if opts.Speaker != "" {
			caps, err := admit.LoadCapabilities(ctx, tx)
			if err != nil {
				return err
			}
			if err := admit.Speaker(opts.Speaker, caps); err != nil {
				return err
			}
		}
		children, err := task.Children(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(children) > 0 {
			return retryParent(ctx, tx, id, children, opts, out)
		}
		if err := refuseCancelledParent(ctx, tx, id); err != nil {
			return err
		}
		return retryOne(ctx, tx, id, opts, out)
	})
	if err != nil {
		return Retried{}, err
	}
	return *out, nil
}

// reason is the replay's reason: it starts with
// compensation.RetryReasonPrefix, so the requeues are counted again.
func (o Options) reason() string {
	r := compensation.RetryReasonPrefix
	if o.By != "" {
		r += " by " + o.By
	}
	if o.Speaker != "" {
		r += " with speaker " + o.Speaker
	}
	return r
}

// retryParent retries each failed or cancelled child of a parent (their
// rows locked after the parent's) and sets the parent running again.
func retryParent(ctx context.Context, tx pgx.Tx, id uuid.UUID, children []task.Child, opts Options, out *Retried) error {
	status, err := task.LockStatus(ctx, tx, id)
	if err != nil {
		return err
	}
	if status != task.Failed && status != task.Cancelled {
		return refused("task %s is %s; only a failed or cancelled task with several languages is retried", id, status)
	}
	for _, c := range children {
		if c.Status != task.Failed && c.Status != task.Cancelled {
			continue
		}
		child := &Retried{TaskID: c.ID, Replayed: []Part{}}
		if err := retryOne(ctx, tx, c.ID, opts, child); err != nil {
			return fmt.Errorf("retry the %s child %s: %w", c.TargetLanguage, c.ID, err)
		}
		for _, p := range child.Replayed {
			p.TaskID = &c.ID
			out.Replayed = append(out.Replayed, p)
		}
		out.Outbox = append(out.Outbox, child.Outbox...)
	}
	if len(out.Replayed) == 0 {
		return refused("task %s: none of its children failed or was cancelled; nothing to retry", id)
	}
	if opts.Speaker != "" {
		if err := apply(ctx, tx, task.ChangeSpeaker(task.Ref{ID: id}, opts.Speaker), out); err != nil {
			return err
		}
	}
	return finish(ctx, tx, id, task.Retry(task.Ref{ID: id}), out)
}

// refuseCancelledParent refuses a child whose parent an operator
// cancelled: its steps would be refused (the migrations' task_stopped);
// the parent is retried instead, its failed and cancelled children with it.
func refuseCancelledParent(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	var parent uuid.UUID
	err := tx.QueryRow(ctx, `SELECT p.id FROM tasks c JOIN tasks p ON p.id = c.parent_task_id
		WHERE c.id = $1 AND p.status = 'cancelled' AND p.error LIKE 'cancelled:%'`, id).Scan(&parent)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read the parent of task %s: %w", id, err)
	}
	return refused("task %s: its parent %s was cancelled; retry the parent", id, parent)
}

// retryOne retries a task that has no children.
func retryOne(ctx context.Context, tx pgx.Tx, id uuid.UUID, opts Options, out *Retried) error {
	status, err := task.LockStatus(ctx, tx, id)
	if err != nil {
		return err
	}
	switch status {
	case task.Compensating:
		return retryCompensating(ctx, tx, id, opts, out)
	case task.Failed, task.Cancelled:
		return retryFailed(ctx, tx, id, opts, out)
	}
	return refused("task %s is %s; only a failed, cancelled or compensating task is retried", id, status)
}

// retryCompensating re-drives a compensating task's speech synthesis.
func retryCompensating(ctx context.Context, tx pgx.Tx, id uuid.UUID, opts Options, out *Retried) error {
	if err := changeSpeaker(ctx, tx, id, opts.Speaker, out); err != nil {
		return err
	}
	attempt, ids, err := compensation.Redrive(ctx, tx, id, opts.Speaker, opts.reason())
	if err != nil {
		return err
	}
	out.Replayed = append(out.Replayed, Part{Step: wire.StepTTS, Attempt: attempt})
	out.Outbox = append(out.Outbox, ids...)
	return readBack(ctx, tx, id, out)
}

// retryFailed replays the unfinished parts of a failed or cancelled
// task's first step that has not succeeded.
func retryFailed(ctx context.Context, tx pgx.Tx, id uuid.UUID, opts Options, out *Retried) error {
	stepName, err := failedStep(ctx, tx, id)
	if err != nil {
		return err
	}
	if opts.Speaker != "" {
		if slices.Index(wire.Pipeline, stepName) > slices.Index(wire.Pipeline, wire.StepTTS) {
			return refused("task %s: its speech was synthesized already (%s failed); a new speaker applies line by line with a redub once it is done",
				id, stepName)
		}
		if err := changeSpeaker(ctx, tx, id, opts.Speaker, out); err != nil {
			return err
		}
	}
	envs, err := unfinishedParts(ctx, tx, id, stepName)
	if err != nil {
		return err
	}
	for _, env := range envs {
		if opts.Speaker != "" {
			if env, err = withSpeaker(env, opts.Speaker); err != nil {
				return err
			}
		}
		fresh, msgID, err := replay.Step(ctx, tx, env, opts.reason())
		if err != nil {
			return err
		}
		part, _ := env.Part()
		out.Replayed = append(out.Replayed, Part{Step: env.Step, Part: part, Attempt: fresh.Attempt})
		out.Outbox = append(out.Outbox, msgID)
	}
	if err := dlq.MarkStepReplayed(ctx, tx, id, stepName); err != nil {
		return err
	}
	return finish(ctx, tx, id, task.Retry(task.Ref{ID: id, Step: stepName}), out)
}

// changeSpeaker records speaker on the task, and on its segments that
// spoke with its former voice and have no audio yet; "" changes nothing.
func changeSpeaker(ctx context.Context, tx pgx.Tx, id uuid.UUID, speaker string, out *Retried) error {
	if speaker == "" {
		return nil
	}
	var former string
	if err := tx.QueryRow(ctx, `SELECT speaker_id FROM tasks WHERE id = $1`, id).Scan(&former); err != nil {
		return fmt.Errorf("read task %s: %w", id, err)
	}
	if err := apply(ctx, tx, task.ChangeSpeaker(task.Ref{ID: id}, speaker), out); err != nil {
		return err
	}
	// tts gave the task's voice to its first speaker's segments.
	if err := segment.SpeakerChanged(ctx, tx, id, former, speaker); err != nil {
		return fmt.Errorf("give task %s's segments the speaker %s: %w", id, speaker, err)
	}
	return nil
}

// withSpeaker returns env with speaker in its payload when its step
// carries one (extract_audio and tts, whose payload's speaker wins over
// the task row's).
func withSpeaker(env *wire.Envelope, speaker string) (*wire.Envelope, error) {
	if env.Step != wire.StepExtractAudio && env.Step != wire.StepTTS {
		return env, nil
	}
	var p map[string]any
	if err := env.UnmarshalPayload(&p); err != nil {
		return nil, err
	}
	p["speaker_id"] = speaker
	out, err := wire.New(env.Step, env.TaskID, env.TraceID, p)
	if err != nil {
		return nil, fmt.Errorf("give the %s message of %s the speaker: %w", env.Step, env.TaskID, err)
	}
	out.Attempt = env.Attempt
	return out, nil
}

// apply applies t in tx.
func apply(ctx context.Context, tx pgx.Tx, t task.Transition, out *Retried) error {
	res, err := task.Apply(ctx, tx, t)
	if err != nil {
		return err
	}
	if res.EventID != 0 {
		out.Outbox = append(out.Outbox, res.EventID)
	}
	return nil
}

// finish applies t (the task running again) and reads the task back.
func finish(ctx context.Context, tx pgx.Tx, id uuid.UUID, t task.Transition, out *Retried) error {
	if err := apply(ctx, tx, t, out); err != nil {
		return err
	}
	return readBack(ctx, tx, id, out)
}

// readBack reads the task's status and speaker into out.
func readBack(ctx context.Context, tx pgx.Tx, id uuid.UUID, out *Retried) error {
	if err := tx.QueryRow(ctx, `SELECT status, speaker_id FROM tasks WHERE id = $1`, id).Scan(&out.Status, &out.Speaker); err != nil {
		return fmt.Errorf("read task %s: %w", id, err)
	}
	return nil
}

// failedStep is the first pipeline step of the task that has not succeeded.
func failedStep(ctx context.Context, tx pgx.Tx, id uuid.UUID) (string, error) {
	for _, name := range wire.Pipeline {
		ok, err := view.StepSucceeded(ctx, tx, id, name)
		if err != nil {
			return "", err
		}
		if !ok {
			return name, nil
		}
	}
	return "", refused("task %s: every step succeeded; nothing to retry", id)
}

// unfinishedParts returns the message of each part of the step without a
// success: the one its latest attempt ran from, or the one the runtime
// registered when it fanned the step out; the first step's is rebuilt from
// the task row when neither was kept.
func unfinishedParts(ctx context.Context, tx pgx.Tx, id uuid.UUID, stepName string) ([]*wire.Envelope, error) {
	envs, err := replay.Unfinished(ctx, tx, id, stepName)
	if err != nil {
		return nil, err
	}
	if len(envs) == 0 && stepName == wire.StepExtractAudio {
		if env, err := task.FirstMessage(ctx, tx, id); err == nil {
			envs = append(envs, env)
		}
	}
	if len(envs) == 0 {
		return nil, refused("task %s: no recorded message of step %s to retry from; replay its dead letter", id, stepName)
	}
	return envs, nil
}
