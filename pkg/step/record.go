package step

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// record commits the attempt's outcome that dec names, with what the
// handler staged if dec says so, publishes the messages the commit added,
// and adds what it found to the delivery's facts.
func (r *Runner) record(ctx context.Context, dl *delivery, dec decision) {
	var fns []func(context.Context, pgx.Tx) error
	if dec.Staged {
		fns = dl.msg.fns
	}
	commitCtx := context.WithoutCancel(ctx)
	begun := time.Now()
	out, err := r.commitRidingOver(commitCtx, dl, fns, r.statements(dl, dec), dec.Record)
	if errors.Is(err, task.ErrRefused) {
		// The task's status refuses the step's change of it (the task was
		// cancelled or failed while the step ran): nothing the step staged
		// is committed; the attempt ends failed with the refusal as its
		// reason, without retry or dead letter, and the message is acked.
		dl.log.Warn().Err(err).Msg("task refused the step's outcome; attempt closed")
		r.cfg.Metrics.outcome(dl.env.Step, "refused")
		closeErr := attempt.MapError(closeRefused(commitCtx, r, dl, err))
		if closeErr == nil {
			f := &dl.facts
			f.Commits++
			f.Recorded, f.Commit, f.CommitErr = dec.Record, commitSettled, err
			return
		}
		err = closeErr
	}
	f := &dl.facts
	f.Commits++
	f.Recorded, f.Commit, f.CommitErr = dec.Record, commitResultOf(err), store.MarkUnavailable(err)
	if err != nil {
		return
	}
	f.PublishErr = r.publishCommitted(commitCtx, begun, out)
}

// publishCommitted publishes the outbox rows a commit begun at begun added,
// unless the sweep may take them first. A row is the sweep's once it is
// SweepAge old, counted from its transaction's start (outbox.created_at is
// that transaction's now(), which is after begun): the publish must end by
// begun + SweepAge/2, leaving the other half for the published rows'
// deletion, so that the two never publish one row both. A commit that took
// longer than that (waiting for a fan-in lock under load, say) publishes
// nothing and leaves its rows to the sweep.
func (r *Runner) publishCommitted(ctx context.Context, begun time.Time, out []*outbox.Message) error {
	if len(out) == 0 {
		return nil
	}
	if took := time.Since(begun); took >= r.cfg.SweepAge/2 {
		return fmt.Errorf("commit took %v, half the outbox sweep's age (%v) or more: its %d messages are left to the sweep",
			took.Round(time.Millisecond), r.cfg.SweepAge, len(out))
	}
	pubCtx, cancel := context.WithDeadline(ctx, begun.Add(r.cfg.SweepAge/2))
	defer cancel()
	return r.relay.Publish(pubCtx, out)
}

// commitResultOf names a commit's (mapped) error for the decisions.
func commitResultOf(err error) commitResult {
	switch {
	case err == nil:
		return committed
	case errors.Is(err, attempt.ErrLeaseLost), errors.Is(err, attempt.ErrDuplicate):
		return commitSettled
	case errors.Is(err, attempt.ErrClaimLost):
		return commitClaimLost
	}
	return commitFailed
}

// statements are the statements that record dec's outcome of the
// delivery's attempt.
func (r *Runner) statements(dl *delivery, dec decision) []stmt {
	env := dl.env
	text := ""
	if dec.Err != nil {
		text = dec.Err.Error()
	}
	finish := statement(attempt.Finish(dl.stepID, r.cfg.Worker, attempt.Outcome(dec.Record), wire.Reason(text)))
	switch dec.Record {
	case recSucceeded:
		stmts := append([]stmt{finish}, dl.msg.stmts...)
		start := task.Start(task.RefOf(env))
		return append(stmts, stmt{sql: start.SQL, args: start.Args, transition: &start})
	case recParked:
		return append([]stmt{finish}, dl.msg.stmts...)
	case recRetried:
		return []stmt{finish, r.retry(dl, dec)}
	case recWaited:
		return []stmt{finish, statement(attempt.Wait(dl.stepID, dec.WaitReason, dec.WaitUntil)), r.retry(dl, dec)}
	case recRefused:
		return []stmt{finish}
	default: // recDeadLettered
		original, _ := json.Marshal(env)
		fail := task.Fail(task.RefOf(env), dl.msg.Part, env.Step+": "+dec.Reason)
		return []stmt{finish,
			{sql: fail.SQL, args: fail.Args, transition: &fail},
			insert(r.deadLetter(uuid.New(), original, env, dec.Class, dec.Reason, dec.Retries))}
	}
}

// retry is the outbox row that carries the next attempt of the delivery
// through the delay tier for dec.Delay.
func (r *Runner) retry(dl *delivery, dec decision) stmt {
	exchange, _ := r.cfg.Delay(dec.Delay)
	body, err := json.Marshal(dl.env.Retry())
	if err != nil {
		dl.log.Error().Err(err).Msg("encode retry")
	}
	return insert(outbox.New(exchange, wire.RoutingKey(dl.env.Step), body))
}

// deadLetter builds the dead-letter envelope (wire.DeadLetter) for the DLQ, published
// under id; retries is how often the step was retried before it gave up.
func (r *Runner) deadLetter(id uuid.UUID, original []byte, env *wire.Envelope, class, reason string, retries int) *outbox.Message {
	dl := wire.NewDeadLetter(original, env, class, reason, time.Now())
	dl.RetryCount, dl.Queue = retries, r.cfg.Queue
	body, err := dl.Marshal()
	if err != nil {
		// Only an unencodable reason could fail; keep the message anyway.
		body, _ = json.Marshal(map[string]any{"original_message": string(original), "failure_reason": reason,
			"error_class": class, "failed_at": time.Now().UTC()})
	}
	return &outbox.Message{MessageID: id, Exchange: "", RoutingKey: r.cfg.DLQ, Body: body}
}

// closeRefused closes the attempt as failed with refusal as its reason.
func closeRefused(ctx context.Context, r *Runner, dl *delivery, refusal error) error {
	_, err := r.commit(ctx, dl.env.TaskID.String(), nil,
		[]stmt{statement(attempt.Refuse(dl.stepID, r.cfg.Worker, wire.Reason(refusal.Error())))})
	return err
}
