package tasks

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// taskCommand is the handler of a command on the task {id} that reads a
// JSON body B: do's answer is written with status, its error answered.
func taskCommand[B any](s Room, status int, do func(ctx context.Context, id uuid.UUID, body B) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body B
		id, err := route.TaskIDAndBody(r, &body)
		var out any
		if err == nil {
			out, err = do(r.Context(), id, body)
		}
		if err != nil {
			s.Fail(w, r, err)
			return
		}
		route.JSON(w, status, out)
	}
}

// cancelBody is what POST /api/tasks/{id}/cancel reads.
type cancelBody struct {
	Reason string `json:"reason"`
}

// cancelTask ends a task that is not finished (task.Cancel): it becomes
// cancelled with "cancelled: <reason>"; its workers' next commit is refused.
// A parent's cancel cancels its children that have not ended (in the same
// statement: pkg/task's cascade).
func (s Room) cancelTask(ctx context.Context, id uuid.UUID, body cancelBody) (any, error) {
	if err := task.CheckCancelReason(body.Reason); err != nil {
		return nil, apierr.BadRequest(err.Error())
	}
	if body.Reason == "" {
		body.Reason = "by an operator in the console"
	}
	if err := s.Commit.Commit(ctx, id, func(tx pgx.Tx) ([]int64, error) {
		res, err := task.Apply(ctx, tx, task.Cancel(task.Ref{ID: id}, body.Reason))
		return []int64{res.EventID}, err
	}); err != nil {
		return nil, err
	}
	sum, err := view.LoadSummary(ctx, s.Pool, id)
	if err != nil {
		return nil, err
	}
	// Cancel means stop: the growing stream ends where it is.
	if err := stream.End(ctx, s.Pool, s.Objects, id, sum.TargetLanguage); err != nil {
		s.Log.Warn().Err(err).Str("task_id", id.String()).Msg("end the stream of a cancelled task")
	}
	return sum, nil
}

// retryBody is what POST /api/tasks/{id}/retry reads: an optional JSON
// object; an empty body retries with the task's voice.
type retryBody struct {
	// Speaker, when given, is the voice the task is dubbed with from now
	// on (a voice the tts workers announced, as at submit).
	Speaker string `json:"speaker"`
}

// retryWith runs a failed or cancelled task again from its failed step, or
// a compensating task's speech synthesis, optionally with another speaker
// (Retry: retry.Task, which dubctl retry calls too), publishes what it
// staged after the commit and answers what it replayed.
func (s Room) retryWith(ctx context.Context, id uuid.UUID, body retryBody) (any, error) {
	var res any
	err := s.Commit.Commit(ctx, id, func(tx pgx.Tx) ([]int64, error) {
		var ids []int64
		var err error
		res, ids, err = s.Retry(ctx, tx, id, strings.TrimSpace(body.Speaker))
		return ids, err
	})
	var refusal *admit.Error
	switch {
	case errors.As(err, &refusal):
		return nil, apierr.BadRequest(refusal.Error())
	case errors.Is(err, s.RetryRefused):
		return nil, apierr.Conflict(err.Error())
	case err != nil:
		return nil, err
	}
	return res, nil
}

// redubBody is what POST /api/tasks/{id}/redub reads.
type redubBody struct {
	Segment int    `json:"segment"`
	Text    string `json:"text"`
}

// redubTask changes the translation of one segment (numbered from 1) of a
// done task and starts the task's next output version (dub.Redub): only
// that segment is synthesized again and the video assembled again; the
// earlier version stays. A parent task is refused (409) with the names of
// its children, an empty text with 400.
func (s Room) redubTask(ctx context.Context, id uuid.UUID, body redubBody) (any, error) {
	var res *dub.Redubbed
	err := s.Commit.Commit(ctx, id, func(tx pgx.Tx) ([]int64, error) {
		var err error
		res, err = dub.Redub(ctx, tx, id, body.Segment, body.Text)
		if err != nil {
			return nil, err
		}
		return res.Outbox, nil
	})
	switch {
	case errors.Is(err, dub.ErrNotFound):
		err = apierr.NotFound(err.Error())
	case errors.Is(err, dub.ErrNoSegment), errors.Is(err, dub.ErrInvalidText):
		err = apierr.BadRequest(err.Error())
	case errors.Is(err, dub.ErrParent):
		err = apierr.Conflict(err.Error())
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
