package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// cancelTask ends a task that is not finished (task.Cancel): it becomes
// cancelled with "cancelled: <reason>"; its workers' next commit is refused.
// A parent's cancel cancels its children that have not ended (in the same
// statement: pkg/task's cascade).
func (s *server) cancelTask(ctx context.Context, id uuid.UUID, body cancelBody) (any, error) {
	if err := task.CheckCancelReason(body.Reason); err != nil {
		return nil, badRequest(err.Error())
	}
	if body.Reason == "" {
		body.Reason = "by an operator in the console"
	}
	res, err := task.Apply(ctx, s.pool, task.Cancel(task.Ref{ID: id}, body.Reason))
	if err != nil {
		return nil, err
	}
	s.flush(ctx, id, []int64{res.EventID})
	return s.loadSummary(ctx, s.pool, id)
}

// cancelBody is what POST /api/tasks/{id}/cancel reads.
type cancelBody struct {
	Reason string `json:"reason"`
}

// taskCommand is the handler of a command on the task {id} that reads a
// JSON body B: do's answer is written with status, its error answered.
func taskCommand[B any](s *server, status int, do func(ctx context.Context, id uuid.UUID, body B) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body B
		id, err := taskIDAndBody(r, &body)
		var out any
		if err == nil {
			out, err = do(r.Context(), id, body)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, status, out)
	}
}

// flush publishes outbox rows after their commit; what fails waits for the
// workers' outbox sweep.
func (s *server) flush(ctx context.Context, id uuid.UUID, ids []int64) {
	var keep []int64
	for _, i := range ids {
		if i != 0 {
			keep = append(keep, i)
		}
	}
	if err := outbox.Flush(ctx, s.pool, s.pub, keep); err != nil {
		s.log.Warn().Err(err).Str("task_id", id.String()).Msg("publish deferred to the outbox sweep")
	}
}

// replayedPart is one part a retry published again; TaskID names the
// child task it belongs to when a parent was retried.
type replayedPart struct {
	TaskID  *uuid.UUID `json:"taskId,omitempty"`
	Step    string     `json:"step"`
	Part    string     `json:"part"`
	Attempt int        `json:"attempt"`
}

// retried is what POST /api/tasks/{id}/retry answers.
type retried struct {
	TaskID   uuid.UUID      `json:"taskId"`
	Status   string         `json:"status"`
	Replayed []replayedPart `json:"replayed"`
}

// retryTask runs a failed (or cancelled) task again from its failed step: the first step
// of the pipeline that has not succeeded publishes each of its unfinished
// parts again with a fresh retry budget (step.Replay; earlier attempts stay
// as history), the task becomes running (task.Retry), and the step's dead
// letters are marked replayed — in one transaction. A parent whose children
// were spawned is retried through them: each failed (or cancelled) child
// is retried so, and the parent runs again until they end.
func (s *server) retryTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := retried{TaskID: id, Replayed: []replayedPart{}}
	var ids []int64
	err = pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var err error
		children, err := task.Children(r.Context(), tx, id)
		if err != nil {
			return err
		}
		if len(children) == 0 {
			out.Replayed, ids, err = retryInTx(r.Context(), tx, id)
			return err
		}
		out.Replayed, ids, err = retryParent(r.Context(), tx, id, children)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.flush(r.Context(), id, ids)
	t, err := s.loadSummary(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out.Status = t.Status
	writeJSON(w, http.StatusOK, out)
}

// lockRetried locks the task's row and refuses a task that did not fail.
func lockRetried(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	status, err := task.LockStatus(ctx, tx, id)
	if err != nil {
		return err
	}
	if !retriable(status) {
		return conflict(fmt.Sprintf("task %s is %s; only a failed or cancelled task is retried", id, status))
	}
	return nil
}

// retriable reports whether a task in status is retried: it failed or was
// cancelled.
func retriable(status string) bool { return status == task.Failed || status == task.Cancelled }

// retryParent retries each failed or cancelled child of a parent (their
// rows locked after the parent's) and sets the parent running again.
func retryParent(ctx context.Context, tx pgx.Tx, id uuid.UUID, children []task.Child) ([]replayedPart, []int64, error) {
	if err := lockRetried(ctx, tx, id); err != nil {
		return nil, nil, err
	}
	var out []replayedPart
	var ids []int64
	for _, c := range children {
		if !retriable(c.Status) {
			continue
		}
		parts, msgs, err := retryInTx(ctx, tx, c.ID)
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
		return nil, nil, conflict(fmt.Sprintf("task %s: none of its children failed; nothing to retry", id))
	}
	res, err := task.Apply(ctx, tx, task.Retry(task.Ref{ID: id}))
	if err != nil {
		return nil, nil, err
	}
	return out, append(ids, res.EventID), nil
}

func retryInTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]replayedPart, []int64, error) {
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
	var out []replayedPart
	var ids []int64
	for _, env := range envs {
		fresh, msgID, err := step.Replay(ctx, tx, env, "console retry")
		if err != nil {
			return nil, nil, err
		}
		part, _ := step.PartOf(env)
		out = append(out, replayedPart{Step: env.Step, Part: part, Attempt: fresh.Attempt})
		ids = append(ids, msgID)
	}
	if err := dlq.MarkStepReplayed(ctx, tx, id, stepName); err != nil {
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
		ok, err := view.StepSucceeded(ctx, tx, id, name)
		if err != nil {
			return "", err
		}
		if !ok {
			return name, nil
		}
	}
	return "", conflict(fmt.Sprintf("task %s: every step succeeded; nothing to retry", id))
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
		return nil, conflict(fmt.Sprintf("task %s: no recorded message of step %s to retry from; replay its dead letter",
			id, stepName))
	}
	return envs, nil
}
