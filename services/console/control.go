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
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// cancelTask ends a task that is not finished (task.Cancel): it becomes
// cancelled with "cancelled: <reason>"; its workers' next commit is refused.
// A parent's cancel cancels its children that have not ended (in the same
// statement: pkg/task's cascade).
func (s *server) cancelTask(ctx context.Context, id uuid.UUID, body cancelBody) (any, error) {
	if err := task.CheckCancelReason(body.Reason); err != nil {
		return nil, apierr.BadRequest(err.Error())
	}
	if body.Reason == "" {
		body.Reason = "by an operator in the console"
	}
	if err := s.commit(ctx, id, func(tx pgx.Tx) ([]int64, error) {
		res, err := task.Apply(ctx, tx, task.Cancel(task.Ref{ID: id}, body.Reason))
		return []int64{res.EventID}, err
	}); err != nil {
		return nil, err
	}
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

// commit runs fn in one transaction and publishes the outbox rows it
// returns after the commit (outbox.Commit); a publish that fails is logged
// and left to the workers' outbox sweep: the change is done.
func (s *server) commit(ctx context.Context, id uuid.UUID, fn func(tx pgx.Tx) ([]int64, error)) error {
	err := outbox.Commit(ctx, s.pool, s.pub, fn)
	if errors.Is(err, outbox.ErrUnpublished) {
		s.log.Warn().Err(err).Str("task_id", id.String()).Msg("publish deferred to the outbox sweep")
		return nil
	}
	return err
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
// (retry.Task, which dubctl retry calls too), publishes what it staged
// after the commit and answers what it replayed.
func (s *server) retryWith(ctx context.Context, id uuid.UUID, body retryBody) (any, error) {
	var res retry.Retried
	err := s.commit(ctx, id, func(tx pgx.Tx) ([]int64, error) {
		var err error
		res, err = retry.Task(ctx, tx, id, retry.Options{Speaker: strings.TrimSpace(body.Speaker), By: "console"})
		return res.Outbox, err
	})
	var refusal *admit.Error
	switch {
	case errors.As(err, &refusal):
		return nil, apierr.BadRequest(refusal.Error())
	case errors.Is(err, retry.ErrRefused):
		return nil, apierr.Conflict(err.Error())
	case err != nil:
		return nil, err
	}
	return res, nil
}
