package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// partKey names one part of one step of a task.
type partKey struct {
	task       uuid.UUID
	step, part string
}

// taskRow is what a rebuilt message is made from.
type taskRow struct {
	id                                     uuid.UUID
	trace, speaker                         string
	sourceVideo, outputVideo, srcLang, dst string
}

// overtakeMargin is how much later than a part's last activity a message
// claimed by its step's workers must have been emitted for the part to
// count as overtaken: more than the longest delay tier (a retry re-enters
// its queue up to a minute after it was recorded) and the settle time.
const overtakeMargin = 2 * time.Minute

// lostMessages re-drives parts whose message was lost, and only those.
//
// A part of a queued or running task is pending while its message is on
// its way to a worker (step.CountPendingParts says exactly when). Under a
// backlog a pending part may wait for hours without any activity, so
// silence alone proves nothing; what tells "waiting" from "lost" is whether
// the broker still holds a message for it. RabbitMQ cannot be searched for
// one message, but it tells how many messages wait in a queue (a passive
// queue declaration: no management plugin). So, per step, the check
// compares
//
//	messages = outbox rows of the step's routing key (committed, not yet
//	           published) + ready messages in the step's work queue + ready
//	           messages in every delay tier (retries of any step)
//	pending  = parts of the step waiting for a message
//
// read in that order (a message moving from outbox to queue to a worker is
// counted once or twice, never missed, and a part claimed meanwhile is no
// longer pending). When messages >= pending every pending part may have
// its message in the broker: nothing is re-driven, and the idle ones are
// counted as skipped_waiting. When pending exceeds messages by d, at least
// d messages are missing. Which ones? When the step's queues hold nothing
// at all, every pending part; else only parts the step's workers overtook:
// within the last STUCK_TASK_SECONDS they claimed a message emitted more
// than overtakeMargin after the part's last activity, and a queue hands out
// its oldest messages first, so the part's message is not waiting behind
// them (with no recent claims, nothing is suspected: the queue does not
// move, and a lost message holds nothing up until it does). Of those, the d
// idle longest are the suspects; a suspect is re-driven when the next check
// finds it missing again with no activity in between.
// Counting errs towards waiting: stale duplicates and other steps' retries
// make messages larger, which delays a re-drive until the queue drains,
// never causes one.
//
// A re-drive never starts a second concurrent attempt: only a part with no
// attempt holding a live lease is pending, the part is checked again under
// its task's row lock before the replay is staged, and an expired attempt is
// closed in the same transaction (its late outcome is refused).
func (r *reconciler) lostMessages(ctx context.Context) ([]Action, error) {
	var c *lostCheck
	err := outbox.Commit(ctx, r.pool, r.pub, func(tx pgx.Tx) ([]int64, error) {
		// One replica at a time: two counting the same deficit would each
		// re-drive it.
		var mine bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('dubflow reconciler lost messages', 0))`).
			Scan(&mine); err != nil {
			return nil, fmt.Errorf("lock the lost-message check: %w", err)
		}
		if !mine {
			return nil, nil
		}
		var err error
		if c, err = r.countLost(ctx, tx); err != nil {
			return nil, err
		}
		for _, stepName := range wire.Pipeline {
			if err := c.step(ctx, stepName); err != nil {
				return nil, err
			}
		}
		r.suspects = c.suspects
		return c.outbox, nil
	})
	if c == nil || err != nil && !errors.Is(err, outbox.ErrUnpublished) {
		return nil, err // rolled back: nothing was re-driven
	}
	return c.acts, published(err)
}

// lostCheck is one lost-message check inside its transaction: the counts it
// read and what it did.
type lostCheck struct {
	r           *reconciler
	tx          pgx.Tx
	now         *time.Time // the check's clock (nil: the database's)
	th          step.PendingThresholds
	unpublished map[string]int               // outbox rows by routing key
	depth       Depths                       // ready messages in the broker
	counts      map[string]step.PendingCount // pending parts by step
	paused      []string                     // steps paused by an operator
	progress    map[string]time.Time         // latest claim by step
	suspects    map[partKey]time.Time        // this check's suspects
	acts        []Action
	outbox      []int64 // staged re-drives to publish after the commit
}

// countLost reads, in this order, the outbox, the broker's queue depths,
// the pending parts and the steps' recent claims (see lostMessages).
func (r *reconciler) countLost(ctx context.Context, tx pgx.Tx) (*lostCheck, error) {
	c := &lostCheck{r: r, tx: tx, suspects: map[partKey]time.Time{}, now: r.at(),
		th: step.PendingThresholds{Idle: r.set.StuckTask, LeaseGrace: r.set.LeaseGrace, Settle: r.set.Settle}}
	keys := make([]string, len(wire.Pipeline))
	for i, s := range wire.Pipeline {
		keys[i] = wire.RoutingKey(s)
	}
	var err error
	if c.unpublished, err = store.OutboxByRoutingKey(ctx, tx, keys); err != nil {
		return nil, err
	}
	if c.depth, err = r.depths(ctx); err != nil {
		return nil, fmt.Errorf("read queue depths (waiting cannot be told from lost; nothing re-driven): %w", err)
	}
	if c.counts, err = step.CountPendingParts(ctx, tx, wire.Pipeline, c.th, c.now); err != nil {
		return nil, err
	}
	if c.progress, err = step.StepProgress(ctx, tx, wire.Pipeline, r.set.StuckTask, c.now); err != nil {
		return nil, err
	}
	if c.paused, err = worker.PausedSteps(ctx, tx); err != nil {
		return nil, err
	}
	return c, nil
}

// step compares one step's pending parts with its messages and suspects,
// or re-drives, the parts whose message is missing.
func (c *lostCheck) step(ctx context.Context, stepName string) error {
	n := c.counts[stepName]
	if n.Idle == 0 {
		return nil
	}
	key := wire.RoutingKey(stepName)
	queued := c.unpublished[key] + c.depth.Ready[key] + c.depth.Delayed
	if slices.Contains(c.paused, stepName) {
		// Nobody consumes a paused step: its parts wait, none is lost.
		c.acts = append(c.acts, Action{Kind: actionWaiting, Step: stepName, Count: n.Idle,
			Detail: fmt.Sprintf("%d parts idle: step paused by an operator; %d pending, %d messages queued", n.Idle,
				n.Pending, queued)})
		return nil
	}
	missing := n.Pending - queued
	var before time.Time // zero: every pending part is missing
	if missing > 0 && queued > 0 {
		// Some have their message queued: suspect only parts the step's
		// workers overtook.
		if at, ok := c.progress[stepName]; ok {
			before = at.Add(-overtakeMargin)
		} else {
			missing = 0 // no recent claims: nothing tells which are missing
		}
	}
	if missing <= 0 {
		c.acts = append(c.acts, Action{Kind: actionWaiting, Step: stepName, Count: n.Idle,
			Detail: fmt.Sprintf("%d parts idle for %s; %d pending, %d messages queued", n.Idle, c.r.set.StuckTask,
				n.Pending, queued)})
		return nil
	}
	parts, err := step.IdlePendingParts(ctx, c.tx, stepName, c.th, before, min(missing, c.r.set.Batch), c.now)
	if err != nil {
		return err
	}
	if waiting := n.Idle - len(parts); waiting > 0 {
		c.acts = append(c.acts, Action{Kind: actionWaiting, Step: stepName, Count: waiting,
			Detail: fmt.Sprintf("%d parts idle but fewer missing (%d)", n.Idle, missing)})
	}
	for _, p := range parts {
		if err := c.part(ctx, p, fmt.Sprintf("message missing (%d pending, %d fewer messages); re-driven if still missing at the next pass", n.Pending, missing)); err != nil {
			return err
		}
	}
	return nil
}

// part suspects p the first time it is found missing, and re-drives it
// when the previous check suspected it with no activity since.
func (c *lostCheck) part(ctx context.Context, p step.PendingPart, why string) error {
	k := partKey{task: p.TaskID, step: p.Step, part: p.Part}
	if seen, ok := c.r.suspects[k]; !ok || !seen.Equal(p.LastActivity) {
		c.suspects[k] = p.LastActivity
		c.acts = append(c.acts, Action{Kind: actionSuspect, TaskID: p.TaskID, Step: p.Step, Part: p.Part, Detail: why})
		return nil
	}
	a, id, err := c.r.redrive(ctx, c.tx, p, c.now)
	if err != nil {
		return err
	}
	c.acts = append(c.acts, a)
	if id != 0 {
		c.outbox = append(c.outbox, id)
	}
	return nil
}

// redrive replays the lost message of pending part p inside tx, after
// checking under its task's row lock that nothing happened to it since it
// was counted, at now (nil: the database's clock). It returns the action and
// the outbox id (0 when nothing was re-driven).
func (r *reconciler) redrive(ctx context.Context, tx pgx.Tx, p step.PendingPart, now *time.Time) (Action, int64, error) {
	act := Action{TaskID: p.TaskID, Step: p.Step, Part: p.Part}
	var t taskRow
	err := tx.QueryRow(ctx, `SELECT id, trace_id, speaker_id, source_video_key, output_video_key, source_language, target_language
		  FROM tasks WHERE id = $1 AND status IN ('queued', 'running') FOR UPDATE SKIP LOCKED`, p.TaskID).
		Scan(&t.id, &t.trace, &t.speaker, &t.sourceVideo, &t.outputVideo, &t.srcLang, &t.dst)
	if errors.Is(err, pgx.ErrNoRows) {
		act.Kind, act.Detail = actionWaiting, "task changed or is locked; checked again at the next pass"
		return act, 0, nil
	}
	if err != nil {
		return act, 0, fmt.Errorf("lock task %s: %w", p.TaskID, err)
	}
	// A claim does not lock the task row: look again at the part itself.
	moved, err := step.MovedOn(ctx, tx, p.TaskID, p.Step, p.Part, p.AttemptID, now)
	if err != nil {
		return act, 0, err
	}
	if moved {
		act.Kind, act.Detail = actionWaiting, "the part moved on while it was checked"
		return act, 0, nil
	}
	var env *wire.Envelope
	if p.Message != nil {
		env, _ = wire.Decode(p.Message)
	}
	if env == nil {
		if env, err = rebuild(t, p.Step, p.Part); err != nil {
			act.Kind, act.Detail = actionUnrecoverable, err.Error()
			return act, 0, nil
		}
	}
	kind := actionStuck
	reason := fmt.Sprintf("%s message lost: no activity for %s and fewer messages queued than parts waiting",
		step.RedriveReasonPrefix, r.set.StuckTask)
	if p.Status == step.StatusRunning {
		kind = actionLease
		reason = step.RedriveReasonPrefix + " lease expired with no worker and its message is not queued"
		closed, err := step.CloseExpiredAttempt(ctx, tx, p.AttemptID, "lease expired with no worker; re-driven by the reconciler", now)
		if err != nil {
			return act, 0, err
		}
		if !closed {
			act.Kind, act.Detail = actionWaiting, "the attempt was taken over while it was checked"
			return act, 0, nil
		}
	}
	a, id, err := replay(ctx, tx, env, reason)
	if err != nil {
		return act, 0, err
	}
	a.Kind = kind
	return a, id, nil
}
