package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
)

// cancelTask ends a task that is not finished (task.Cancel): it becomes
// cancelled with "cancelled: <reason>"; its workers' next commit is refused.
// A parent's cancel cancels its children that have not ended (in the same
// statement: pkg/task's cascade).
func (s *server) cancelTask(ctx context.Context, id uuid.UUID, body cancelBody) (any, error) {
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

// retried is what POST /api/tasks/{id}/retry answers.
type retried = dlq.Retried

// retryTask runs a failed (or cancelled) task again from its failed step
// (dlq.RetryTask, which dubctl's database mode calls too): the first step
// of the pipeline that has not succeeded publishes each of its unfinished
// parts again with a fresh retry budget (earlier attempts stay as
// history), the task becomes running, and the step's dead letters are
// marked replayed — in one transaction. A parent whose children were
// spawned is retried through them. A task that cannot be retried is 409.
func (s *server) retryTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := dlq.RetryTask(r.Context(), s.pool, id, "console retry")
	if errors.Is(err, dlq.ErrNotRetriable) {
		err = conflict(err.Error())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.flush(r.Context(), id, out.Outbox)
	writeJSON(w, http.StatusOK, out)
}
