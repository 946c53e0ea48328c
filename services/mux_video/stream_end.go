package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// streamEnd is mux_video as an integrator: it consumes its own queue of
// events (wire.QueueStreamEnd, bound to event.task.failed and
// event.task.cancelled) and ends the stored stream of each such task
// (stream.End: the playlists in the object store get #EXT-X-ENDLIST), so
// that a player reading them from storage stops waiting, whichever way
// the task ended — the step runtime, a dead letter, the reconciler, a
// parent's cancel. A task without a stream, or whose stream has ended,
// costs two reads; an unreadable event is acked with a warning; what
// cannot be done now (Postgres or the object store is down) is handed
// back and tried again after a growing pause (step.Settler).
type streamEnd struct {
	db      *pgxpool.Pool
	objects stream.Putter
	log     zerolog.Logger
}

// handle ends the stream of the task of one event, then acks it.
func (e *streamEnd) handle(ctx context.Context, d step.Delivery, settle *step.Settler) {
	log := e.log.With().Str("queue", wire.QueueStreamEnd).Str("routing_key", d.RoutingKey).
		Str("message_id", d.MessageID).Logger()
	defer func() {
		// The queue has no delivery limit: a panic is handed back after
		// the pause, not redelivered at once, again and again.
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Msg("ending a stream panicked; event handed back")
			settle.HandBack(ctx, d, log)
		}
	}()
	ev, err := wire.DecodeEvent(d.Body)
	if err == nil && ev.TaskID == uuid.Nil {
		err = errors.New("no task_id")
	}
	if err != nil {
		log.Warn().Err(err).Int("bytes", len(d.Body)).Msg("unreadable event acked; no stream ended")
		settle.Ack(d, log)
		return
	}
	log = log.With().Str("task_id", ev.TaskID.String()).Str("event", ev.Event).Str("trace_id", ev.TraceID).Logger()
	outcome, err := e.end(ctx, ev.TaskID)
	if err != nil {
		log.Warn().Err(err).Msg("stream not ended yet; event handed back")
		settle.HandBack(ctx, d, log)
		return
	}
	if outcome == "ended" {
		log.Info().Msg("stream ended with its task")
	} else {
		log.Debug().Str("outcome", outcome).Msg("no stream to end")
	}
	settle.Ack(d, log)
}

// end ends the stream of task id, if it failed or was cancelled (it may
// have been retried since the event), and says what it did: "ended", or
// why nothing was to be done.
func (e *streamEnd) end(ctx context.Context, id uuid.UUID) (string, error) {
	var status, language string
	err := e.db.QueryRow(ctx, `SELECT status, target_language FROM tasks WHERE id = $1`, id).Scan(&status, &language)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "no such task", nil
	case err != nil:
		return "", fmt.Errorf("read task %s: %w", id, err)
	case status != task.Failed && status != task.Cancelled:
		return "the task is " + status + " now", nil
	}
	sum, err := stream.Summarize(ctx, e.db, id)
	switch {
	case err != nil:
		return "", err
	case sum == nil:
		return "the task has no stream", nil
	case sum.Ended:
		return "the stream has ended", nil
	}
	if err := stream.End(ctx, e.db, e.objects, id, language); err != nil {
		return "", err
	}
	return "ended", nil
}
