package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrNotRetriable is returned (wrapped in an error that says why) by
// RetryTask for a task it does not retry: one that did not fail, one with
// nothing left to run, one without a recorded message to run from.
var ErrNotRetriable = errors.New("task cannot be retried")

// refusal is an error whose text is its reason alone and that is its
// sentinel (ErrNotRetriable, ErrBadFilter) for errors.Is: a door answers
// the reason as it is.
type refusal struct {
	msg      string
	sentinel error
}

func (e *refusal) Error() string        { return e.msg }
func (e *refusal) Is(target error) bool { return target == e.sentinel }

// refuseRetry is a refusal of RetryTask.
func refuseRetry(format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), sentinel: ErrNotRetriable}
}

// Retried is what a retry of a task started, in the read model's JSON (the
// answer of POST /api/tasks/{id}/retry and of `dubctl retry --json`).
type Retried struct {
	TaskID uuid.UUID `json:"taskId"`
	// Status is the task's status after the retry.
	Status   string        `json:"status"`
	Replayed []RetriedPart `json:"replayed"`
	// Outbox lists the committed outbox rows (the messages and the
	// task.retried events): publish them with outbox.Flush, or leave them
	// to a worker's sweep.
	Outbox []int64 `json:"-"`
}

// RetriedPart is one part a retry published again; TaskID names the child
// task it belongs to when a parent was retried.
type RetriedPart struct {
	TaskID  *uuid.UUID `json:"taskId,omitempty"`
	Step    string     `json:"step"`
	Part    string     `json:"part"`
	Attempt int        `json:"attempt"`
}

// RetryTask runs a failed (or cancelled) task again from its failed step,
// in one transaction: the first step of the pipeline that has not
// succeeded publishes each of its unfinished parts again with a fresh
// retry budget (step.Replay, with reason naming who retried; earlier
// attempts stay as history), the step's dead letters are marked replayed,
// and the task becomes running (task.Retry). A parent whose children were
// spawned is retried through them: each failed or cancelled child is
// retried so, and the parent runs again until they end. A task that is not
// there is task.ErrNotFound; one that cannot be retried ErrNotRetriable,
// whose text says why. Publish the returned Outbox after it returns.
func RetryTask(ctx context.Context, db Beginner, id uuid.UUID, reason string) (Retried, error) {
	out := Retried{TaskID: id, Replayed: []RetriedPart{}}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		children, err := task.Children(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(children) == 0 {
			out.Replayed, out.Outbox, err = retryInTx(ctx, tx, id, reason)
		} else {
			out.Replayed, out.Outbox, err = retryParent(ctx, tx, id, children, reason)
		}
		if err != nil {
			return err
		}
		out.Status, err = task.LockStatus(ctx, tx, id)
		return err
	})
	if err != nil {
		return Retried{}, err
	}
	return out, nil
}

// Beginner starts a transaction: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// lockRetried locks the task's row and refuses a task that did not fail.
func lockRetried(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	status, err := task.LockStatus(ctx, tx, id)
	if err != nil {
		return err
	}
	if !retriable(status) {
		return refuseRetry("task %s is %s; only a failed or cancelled task is retried", id, status)
	}
	return nil
}

// retriable reports whether a task in status is retried: it failed or was
// cancelled.
func retriable(status string) bool { return status == task.Failed || status == task.Cancelled }

// retryParent retries each failed or cancelled child of a parent (their
// rows locked after the parent's) and sets the parent running again.
func retryParent(ctx context.Context, tx pgx.Tx, id uuid.UUID, children []task.Child, reason string) ([]RetriedPart, []int64, error) {
	if err := lockRetried(ctx, tx, id); err != nil {
		return nil, nil, err
	}
	var out []RetriedPart
	var ids []int64
	for _, c := range children {
		if !retriable(c.Status) {
			continue
		}
		parts, msgs, err := retryInTx(ctx, tx, c.ID, reason)
		if err != nil {
			return nil, nil, fmt.Errorf("retry the %s child %s: %w", c.TargetLanguage, c.ID, err)
		}
		for i := range parts {
			child := c.ID
			parts[i].TaskID = &child
		}
		out, ids = append(out, parts...), append(ids, msgs...)
	}
	if len(out) == 0 {
		return nil, nil, refuseRetry("task %s: none of its children failed; nothing to retry", id)
	}
	res, err := task.Apply(ctx, tx, task.Retry(task.Ref{ID: id}))
	if err != nil {
		return nil, nil, err
	}
	return out, append(ids, res.EventID), nil
}

// retryInTx retries one task that is not a parent from its failed step.
func retryInTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string) ([]RetriedPart, []int64, error) {
	if err := lockRetried(ctx, tx, id); err != nil {
		return nil, nil, err
	}
	stepName, err := failedStep(ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	envs, err := unfinishedParts(ctx, tx, id, stepName)
	if err != nil {
		return nil, nil, err
	}
	var out []RetriedPart
	var ids []int64
	for _, env := range envs {
		fresh, msgID, err := step.Replay(ctx, tx, env, reason)
		if err != nil {
			return nil, nil, err
		}
		part, _ := step.PartOf(env)
		out = append(out, RetriedPart{Step: env.Step, Part: part, Attempt: fresh.Attempt})
		ids = append(ids, msgID)
	}
	if err := MarkStepReplayed(ctx, tx, id, stepName); err != nil {
		return nil, nil, err
	}
	res, err := task.Apply(ctx, tx, task.Retry(task.Ref{ID: id, Step: stepName}))
	if err != nil {
		return nil, nil, err
	}
	return out, append(ids, res.EventID), nil
}

// failedStep is the first pipeline step of the task that has not succeeded.
func failedStep(ctx context.Context, tx pgx.Tx, id uuid.UUID) (string, error) {
	for _, name := range wire.Pipeline {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT step_succeeded($1, $2)`, id, name).Scan(&ok); err != nil {
			return "", fmt.Errorf("read step %s of %s: %w", name, id, err)
		}
		if !ok {
			return name, nil
		}
	}
	return "", refuseRetry("task %s: every step succeeded; nothing to retry", id)
}

// unfinishedParts returns the message of each part of the step without a
// success: the one its latest attempt ran from, or the one the runtime
// registered when it fanned the step out.
func unfinishedParts(ctx context.Context, tx pgx.Tx, id uuid.UUID, stepName string) ([]*wire.Envelope, error) {
	envs, err := step.UnfinishedMessages(ctx, tx, id, stepName)
	if err != nil {
		return nil, err
	}
	if len(envs) == 0 && stepName == wire.StepExtractAudio {
		// The first message is rebuilt from the task row, as submit made it.
		if env, err := task.FirstMessage(ctx, tx, id); err == nil {
			envs = append(envs, env)
		}
	}
	if len(envs) == 0 {
		return nil, refuseRetry("task %s: no recorded message of step %s to retry from; replay its dead letter",
			id, stepName)
	}
	return envs, nil
}
