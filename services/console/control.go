package main

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
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

// retryBody is what POST /api/tasks/{id}/retry reads: an optional JSON
// object; an empty body retries with the task's voice.
type retryBody struct {
	// Speaker, when given, is the voice the task is dubbed with from now
	// on (a voice the tts workers announced, as at submit).
	Speaker string `json:"speaker"`
}

// retryTask is POST /api/tasks/{id}/retry (retryWith).
func (s *server) retryTask(w http.ResponseWriter, r *http.Request) {
	taskCommand(s, http.StatusOK, s.retryWith)(w, r)
}

// retryWith runs a failed or cancelled task again from its failed step, or
// a compensating task's speech synthesis, optionally with another speaker
// (retry.Task, which dubctl retry calls too), then publishes what it
// staged and answers what it replayed.
func (s *server) retryWith(ctx context.Context, id uuid.UUID, body retryBody) (any, error) {
	res, err := retry.Task(ctx, s.pool, id, retry.Options{Speaker: strings.TrimSpace(body.Speaker), By: "console"})
	var refusal *admit.Error
	switch {
	case errors.As(err, &refusal):
		return nil, badRequest(refusal.Error())
	case errors.Is(err, retry.ErrRefused):
		return nil, conflict(err.Error())
	case err != nil:
		return nil, err
	}
	s.flush(ctx, id, res.Outbox)
	return res, nil
}
