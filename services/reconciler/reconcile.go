package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Settings tune a pass.
type Settings struct {
	// StuckTask is how long a part waiting for its message may go without
	// activity before the reconciler checks whether the message was lost.
	StuckTask time.Duration
	// LeaseGrace is how long after its lease ran out a held part is left to
	// the broker's redelivery before the same check.
	LeaseGrace time.Duration
	// Settle leaves parts younger than this out of the count of parts
	// waiting for a message (their message may be between outbox and queue).
	Settle    time.Duration
	OutboxAge time.Duration
	// TaskMaxIdle ends a queued or running task that made no progress for
	// this long; CompensatingMax ends a task compensating for this long.
	TaskMaxIdle     time.Duration
	CompensatingMax time.Duration
	Batch           int
}

// Actions a pass reports (the metric's action label).
const (
	actionLease         = "lease_redriven"
	actionOutbox        = "outbox_published"
	actionReleased      = "held_released"
	actionStuck         = "task_redriven"
	actionWaiting       = "skipped_waiting"
	actionSuspect       = "suspected_lost"
	actionClosed        = "attempt_closed"
	actionFailed        = "task_failed"
	actionCancelled     = "task_cancelled"
	actionUnrecoverable = "unrecoverable"
)

// Action is one thing a pass did (or could not do).
type Action struct {
	Kind   string
	TaskID uuid.UUID
	Step   string
	Part   string
	// Attempt is the replayed message's attempt.
	Attempt int
	// Count is how many parts the action stands for (skipped_waiting sums
	// them per step); 0 means 1.
	Count  int
	Detail string
}

// n is how many parts a stands for.
func (a Action) n() int { return max(a.Count, 1) }

// reconciler runs passes.
type reconciler struct {
	pool   *pgxpool.Pool
	pub    step.Publisher
	depths DepthFunc
	set    Settings
	// now is the clock the passes judge ages and leases by; nil is the
	// database's own clock (the one leases are written by), which the
	// service uses. Tests move it, as river's rescuer's tests do.
	now func() time.Time
	// suspects are the parts the last lost-message check found missing,
	// with their last activity; a part is re-driven only when the next
	// check finds it missing again with no activity in between.
	suspects map[partKey]time.Time
}

// at is the time the passes' statements take as their clock: nil for the
// database's own.
func (r *reconciler) at() *time.Time {
	if r.now == nil {
		return nil
	}
	t := r.now()
	return &t
}

// runOnce runs every check once and returns what it did. Each check runs in
// its own transaction and locks what it touches (SKIP LOCKED, or an advisory
// lock), so replicas running passes at the same moment share the work. The
// service calls it every RECONCILE_INTERVAL_SECONDS; tests call it directly.
func (r *reconciler) runOnce(ctx context.Context) ([]Action, error) {
	var all []Action
	var errs []error
	for _, check := range []func(context.Context) ([]Action, error){r.endedTaskLeases, r.strandedChildren, r.heldParts, r.outbox, r.lostMessages, r.overdueTasks} {
		acts, err := check(ctx)
		all = append(all, acts...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// endedTaskLeases closes the attempts of done, failed or cancelled tasks whose lease
// ran out more than LeaseGrace ago (their worker died and nothing will take
// them over); nothing is re-driven. Held parts of live tasks are the
// lost-message check's.
func (r *reconciler) endedTaskLeases(ctx context.Context) ([]Action, error) {
	closed, err := step.CloseEndedAttempts(ctx, r.pool, r.set.LeaseGrace, r.set.Batch, r.at())
	acts := make([]Action, len(closed))
	for i, c := range closed {
		acts[i] = Action{Kind: actionClosed, TaskID: c.TaskID, Step: c.Step, Part: c.Part,
			Detail: "lease expired; task is " + c.TaskStatus + ", nothing re-driven"}
	}
	return acts, err
}

// strandedChildren cancels the children that have not ended of parents an
// operator cancelled, which the parent's cancel skipped because a step of
// theirs held their row at that moment (task.CancelStranded): their steps
// are refused since, so nothing else would end them.
func (r *reconciler) strandedChildren(ctx context.Context) ([]Action, error) {
	var acts []Action
	err := outbox.Commit(ctx, r.pool, r.pub, func(tx pgx.Tx) ([]int64, error) {
		acts = nil
		var ids []int64
		stranded, err := task.CancelStranded(ctx, tx, r.set.Batch)
		for _, c := range stranded {
			acts = append(acts, Action{Kind: actionCancelled, TaskID: c.ID, Detail: "its parent " + c.Parent.String() + " was cancelled"})
			ids = append(ids, c.EventID)
		}
		return ids, err
	})
	if err != nil && !errors.Is(err, outbox.ErrUnpublished) {
		return acts, err
	}
	return acts, published(err)
}

// heldParts lets in the held parts of live tasks whose windows have room
// though parts were held longer than OutboxAge (a release that never ran:
// an older worker during a rolling upgrade) and publishes them.
func (r *reconciler) heldParts(ctx context.Context) ([]Action, error) {
	stuck, err := step.ReleaseStuckWindows(ctx, r.pool, r.set.OutboxAge, r.set.Batch, r.at())
	var acts []Action
	var ids []int64
	for _, w := range stuck {
		ids = append(ids, w.Released...)
		acts = append(acts, Action{Kind: actionReleased, TaskID: w.TaskID, Step: w.Step, Count: len(w.Released),
			Detail: fmt.Sprintf("%d held part(s) let into the window nothing had released", len(w.Released))})
	}
	if len(ids) > 0 {
		err = errors.Join(err, flush(ctx, r.pool, r.pub, ids))
	}
	return acts, err
}

// outbox publishes rows older than OutboxAge: messages committed with a
// step whose publish never happened (a crash between commit and publish,
// a broker outage) and that no worker's sweep took.
func (r *reconciler) outbox(ctx context.Context) ([]Action, error) {
	rows, err := r.pool.Query(ctx, `SELECT id, routing_key FROM outbox WHERE created_at < coalesce($3::timestamptz, now()) - $1::interval
		ORDER BY id LIMIT $2`, r.set.OutboxAge, r.set.Batch, r.at())
	if err != nil {
		return nil, fmt.Errorf("find old outbox rows: %w", err)
	}
	type row struct {
		id  int64
		key string
	}
	old, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var o row
		return o, r.Scan(&o.id, &o.key)
	})
	if err != nil || len(old) == 0 {
		return nil, err
	}
	ids := make([]int64, len(old))
	for i, o := range old {
		ids[i] = o.id
	}
	ferr := outbox.Flush(ctx, r.pool, r.pub, ids)
	// Rows gone were published (by this pass or by a concurrent sweep).
	rows, err = r.pool.Query(ctx, `SELECT id FROM outbox WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, errors.Join(ferr, fmt.Errorf("check outbox rows: %w", err))
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, errors.Join(ferr, fmt.Errorf("check outbox rows: %w", err))
	}
	remaining := map[int64]bool{}
	for _, id := range left {
		remaining[id] = true
	}
	var acts []Action
	for _, o := range old {
		if !remaining[o.id] {
			acts = append(acts, Action{Kind: actionOutbox, Detail: fmt.Sprintf("outbox row %d to %s", o.id, o.key)})
		}
	}
	if ferr != nil {
		return acts, fmt.Errorf("publish outbox: %w", ferr)
	}
	return acts, nil
}

// rebuild makes the standard message of a step that never ran from the task
// row (the object keys of wire.DefaultKeys).
func rebuild(t taskRow, stepName, part string) (*wire.Envelope, error) {
	keys := wire.DefaultKeys(t.id)
	var payload any
	switch stepName {
	case wire.StepExtractAudio:
		payload = wire.ExtractAudio{SourceVideoKey: or(t.sourceVideo, keys.SourceVideo), OutputAudioKey: keys.SourceAudio,
			SourceLanguage: t.srcLang, TargetLanguage: t.dst, SpeakerID: t.speaker}
	case wire.StepASR:
		payload = wire.ASR{AudioKey: keys.SourceAudio, Language: t.srcLang, OutputKey: keys.ASR}
	case wire.StepTranslate:
		if part == "" || strings.Contains(part, "#") {
			return nil, fmt.Errorf("translate part %q never ran and its segment ids cannot be rebuilt", part)
		}
		payload = wire.Translate{TaskID: t.id, SegmentIDs: strings.Split(part, ","), SourceLanguage: t.srcLang,
			TargetLanguage: t.dst}
	case wire.StepTTS:
		p := wire.TTS{TaskID: t.id, SpeakerID: t.speaker}
		if strings.HasPrefix(part, "seg-") {
			// A translate batch's part, named by its segment ids.
			if strings.Contains(part, "#") {
				return nil, fmt.Errorf("tts part %q never ran and its segment ids cannot be rebuilt", part)
			}
			p.SegmentIDs = strings.Split(part, ",")
		}
		payload = p
	case wire.StepMuxVideo:
		payload = wire.MuxVideo{TaskID: t.id, SourceVideoKey: or(t.sourceVideo, keys.SourceVideo),
			TTSAudioKey: keys.DubAudio, OutputVideoKey: or(t.outputVideo, keys.OutputVideo)}
	default:
		return nil, fmt.Errorf("no standard message for step %q", stepName)
	}
	env, err := wire.New(stepName, t.id, t.trace, payload)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s message: %w", stepName, err)
	}
	return env, nil
}

// replay stages env's step again with a fresh retry budget.
func replay(ctx context.Context, tx pgx.Tx, env *wire.Envelope, reason string) (Action, int64, error) {
	part, err := step.PartOf(env)
	if err != nil {
		return Action{}, 0, err
	}
	fresh, id, err := step.Replay(ctx, tx, env, reason)
	if err != nil {
		return Action{}, 0, err
	}
	return Action{TaskID: env.TaskID, Step: env.Step, Part: part, Attempt: fresh.Attempt, Detail: reason}, id, nil
}

// flush publishes outbox rows committed already (outbox.Flush).
func flush(ctx context.Context, pool *pgxpool.Pool, pub step.Publisher, ids []int64) error {
	return published(outbox.Flush(ctx, pool, pub, ids))
}

// published is the failure of a publish after a commit as a pass reports
// it (nil for none): the messages stay in the outbox for a sweep.
func published(err error) error {
	if err != nil {
		return fmt.Errorf("publish re-driven messages (they stay in the outbox): %w", err)
	}
	return nil
}

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
