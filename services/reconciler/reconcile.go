package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Settings tune a pass.
type Settings struct {
	StuckTask  time.Duration
	LeaseGrace time.Duration
	OutboxAge  time.Duration
	Batch      int
}

// Actions a pass reports (the metric's action label).
const (
	actionLease         = "lease_redriven"
	actionOutbox        = "outbox_published"
	actionStuck         = "task_redriven"
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
	Detail  string
}

// reconciler runs passes.
type reconciler struct {
	pool *pgxpool.Pool
	pub  step.Publisher
	set  Settings
}

// pass runs the three checks once and returns what it did. Each check runs
// in its own transaction and locks what it touches (SKIP LOCKED), so
// replicas running passes at the same moment share the work.
func (r *reconciler) pass(ctx context.Context) ([]Action, error) {
	var all []Action
	var errs []error
	for _, check := range []func(context.Context) ([]Action, error){r.expiredLeases, r.outbox, r.stuckTasks} {
		acts, err := check(ctx)
		all = append(all, acts...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// expiredLeases closes attempts whose lease ran out more than LeaseGrace ago
// (their worker died and no redelivery took them over) and replays their
// message with a fresh retry budget. A worker that was only slow loses its
// outcome (finish_step refuses it) and the replay does the work.
func (r *reconciler) expiredLeases(ctx context.Context) ([]Action, error) {
	var acts []Action
	var outbox []int64
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT s.id, s.task_id, s.step, s.part, s.message, t.status
			  FROM task_steps s JOIN tasks t ON t.id = s.task_id
			 WHERE s.status = 'running' AND s.lease_until < now() - $1::interval
			 ORDER BY s.lease_until LIMIT $2
			 FOR UPDATE OF s, t SKIP LOCKED`, r.set.LeaseGrace, r.set.Batch)
		if err != nil {
			return fmt.Errorf("find expired leases: %w", err)
		}
		type lease struct {
			id               int64
			task             uuid.UUID
			step, part, stat string
			message          []byte
		}
		leases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease, error) {
			var l lease
			return l, row.Scan(&l.id, &l.task, &l.step, &l.part, &l.message, &l.stat)
		})
		if err != nil {
			return fmt.Errorf("find expired leases: %w", err)
		}
		for _, l := range leases {
			if _, err := tx.Exec(ctx, `UPDATE task_steps SET status = 'failed', finished_at = now(), lease_until = NULL,
				error = 'lease expired with no worker; re-driven by the reconciler' WHERE id = $1`, l.id); err != nil {
				return fmt.Errorf("close expired attempt %d: %w", l.id, err)
			}
			if l.stat == "done" || l.stat == "failed" {
				acts = append(acts, Action{Kind: actionLease, TaskID: l.task, Step: l.step, Part: l.part,
					Detail: "attempt closed; task is " + l.stat + ", nothing re-driven"})
				continue
			}
			var env *wire.Envelope
			if l.message != nil {
				env, _ = wire.Decode(l.message)
			}
			if env == nil {
				acts = append(acts, Action{Kind: actionUnrecoverable, TaskID: l.task, Step: l.step, Part: l.part,
					Detail: "expired attempt has no readable message; the stuck-task check rebuilds it"})
				continue
			}
			a, id, err := replay(ctx, tx, env, "reconciler: lease expired with no worker")
			if err != nil {
				return err
			}
			a.Kind = actionLease
			acts = append(acts, a)
			outbox = append(outbox, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return acts, flush(ctx, r.pool, r.pub, outbox)
}

// outbox publishes rows older than OutboxAge: messages committed with a
// step whose publish never happened (a crash between commit and publish,
// a broker outage) and that no worker's sweep took.
func (r *reconciler) outbox(ctx context.Context) ([]Action, error) {
	rows, err := r.pool.Query(ctx, `SELECT id, routing_key FROM outbox WHERE created_at < now() - $1::interval
		ORDER BY id LIMIT $2`, r.set.OutboxAge, r.set.Batch)
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
	ferr := step.Flush(ctx, r.pool, r.pub, ids)
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

// stuckTask is a task row the stuck-task check re-drives.
type stuckTask struct {
	id                                     uuid.UUID
	status, trace, speaker                 string
	sourceVideo, outputVideo, srcLang, dst string
}

// stuckTasks re-drives queued and running tasks without progress for
// StuckTask and without a live step: the first pipeline step that has not
// succeeded (each unfinished part of translate) is replayed from the
// message its last attempt ran from, or from one rebuilt from the task row
// when it never ran. A parked step is left to tts_requeue. The task's
// updated_at moves, so the next re-drive waits StuckTask again.
func (r *reconciler) stuckTasks(ctx context.Context) ([]Action, error) {
	var acts []Action
	var outbox []int64
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT t.id, t.status, t.trace_id, t.speaker_id, t.source_video_key,
			       t.output_video_key, t.source_language, t.target_language
			  FROM tasks t
			 WHERE t.status IN ('queued', 'running') AND t.updated_at < now() - $1::interval
			   AND NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = t.id
			                   AND s.status = 'running' AND s.lease_until > now())
			 ORDER BY t.updated_at LIMIT $2
			 FOR UPDATE OF t SKIP LOCKED`, r.set.StuckTask, r.set.Batch)
		if err != nil {
			return fmt.Errorf("find stuck tasks: %w", err)
		}
		tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stuckTask, error) {
			var t stuckTask
			return t, row.Scan(&t.id, &t.status, &t.trace, &t.speaker, &t.sourceVideo, &t.outputVideo, &t.srcLang, &t.dst)
		})
		if err != nil {
			return fmt.Errorf("find stuck tasks: %w", err)
		}
		for _, t := range tasks {
			a, ids, err := r.redrive(ctx, tx, t)
			if err != nil {
				return err
			}
			acts = append(acts, a...)
			outbox = append(outbox, ids...)
			if _, err := tx.Exec(ctx, `UPDATE tasks SET updated_at = now() WHERE id = $1`, t.id); err != nil {
				return fmt.Errorf("touch task %s: %w", t.id, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return acts, flush(ctx, r.pool, r.pub, outbox)
}

// redrive replays what task t waits for.
func (r *reconciler) redrive(ctx context.Context, tx pgx.Tx, t stuckTask) ([]Action, []int64, error) {
	next := ""
	for _, s := range wire.Pipeline {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT step_succeeded($1, $2)`, t.id, s).Scan(&ok); err != nil {
			return nil, nil, fmt.Errorf("check %s of %s: %w", s, t.id, err)
		}
		if !ok {
			next = s
			break
		}
	}
	if next == "" {
		return []Action{{Kind: actionUnrecoverable, TaskID: t.id,
			Detail: "every step succeeded but the task is " + t.status}}, nil, nil
	}
	parts := []string{""}
	if next == wire.StepTranslate {
		rows, err := tx.Query(ctx, `SELECT p.part FROM step_parts p WHERE p.task_id = $1 AND p.step = 'translate'
			AND NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = p.task_id AND s.step = p.step
			                AND s.part = p.part AND s.status = 'succeeded') ORDER BY p.part`, t.id)
		if err != nil {
			return nil, nil, fmt.Errorf("read translate parts of %s: %w", t.id, err)
		}
		if parts, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, nil, fmt.Errorf("read translate parts of %s: %w", t.id, err)
		}
		if len(parts) == 0 {
			return []Action{{Kind: actionUnrecoverable, TaskID: t.id, Step: next,
				Detail: "asr succeeded but emitted no translate batch"}}, nil, nil
		}
	}
	var acts []Action
	var ids []int64
	for _, part := range parts {
		var status string
		var message []byte
		var deadLettered bool
		err := tx.QueryRow(ctx, `SELECT s.status, s.message, EXISTS (SELECT 1 FROM dead_letters d
			        WHERE d.task_id = s.task_id AND d.step = s.step AND d.attempt = s.attempt AND d.replayed_at IS NULL)
			  FROM task_steps s WHERE s.task_id = $1 AND s.step = $2 AND s.part = $3
			 ORDER BY s.attempt DESC LIMIT 1`, t.id, next, part).Scan(&status, &message, &deadLettered)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, fmt.Errorf("read last %s attempt of %s: %w", next, t.id, err)
		}
		switch {
		case status == "parked":
			acts = append(acts, Action{Kind: actionUnrecoverable, TaskID: t.id, Step: next, Part: part,
				Detail: "step parked for an operator (tts_requeue)"})
			continue
		case deadLettered:
			acts = append(acts, Action{Kind: actionUnrecoverable, TaskID: t.id, Step: next, Part: part,
				Detail: "last attempt dead-lettered; waits for dubctl dlq replay"})
			continue
		}
		var env *wire.Envelope
		if message != nil {
			env, _ = wire.Decode(message)
		}
		if env == nil {
			if env, err = rebuild(t, next, part); err != nil {
				acts = append(acts, Action{Kind: actionUnrecoverable, TaskID: t.id, Step: next, Part: part, Detail: err.Error()})
				continue
			}
		}
		a, id, err := replay(ctx, tx, env, fmt.Sprintf("reconciler: no progress for %s", r.set.StuckTask))
		if err != nil {
			return nil, nil, err
		}
		a.Kind = actionStuck
		acts = append(acts, a)
		ids = append(ids, id)
	}
	return acts, ids, nil
}

// rebuild makes the standard message of a step that never ran from the task
// row (the object keys of wire.DefaultKeys).
func rebuild(t stuckTask, stepName, part string) (*wire.Envelope, error) {
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
		payload = wire.TTS{TaskID: t.id, SpeakerID: t.speaker}
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

func flush(ctx context.Context, pool *pgxpool.Pool, pub step.Publisher, ids []int64) error {
	if err := step.Flush(ctx, pool, pub, ids); err != nil {
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
