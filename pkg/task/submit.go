package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Beginner starts transactions (a *pgxpool.Pool).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ErrExists is returned by Submit for a task id that is taken.
var ErrExists = errors.New("task exists already")

// errCreatedBefore ends a retried submission whose first try, of unknown
// outcome, had created the task.
var errCreatedBefore = errors.New("task created by the earlier try")

// Submit creates the task of env (queued, announced by event.task.queued)
// from its extract_audio payload p and adds env, its first message, to the
// outbox, in one transaction. A payload naming several target_languages
// makes a parent task (see Spawn): the video is stored once, under the
// parent's key; the asr worker copies it to each child's key where the
// parent's asr completes (services/asr, spawnChildren). It returns the outbox rows to publish after
// the commit (outbox.Flush; a sweep publishes them otherwise). A task that
// exists already is refused; a commit the database's failover interrupted
// is resolved by reading (store.RideOver) and never creates it twice. The
// task's plan (PlanOf: the steps it skips, the subtitles it starts from,
// the burned-in subtitles it wants) is recorded in the same transaction.
// fileName is the name the video was uploaded
// as (admit.Task.FileName; "" when unknown).
func Submit(ctx context.Context, db Beginner, env *wire.Envelope, p wire.ExtractAudio, fileName string) ([]int64, error) {
	return SubmitProbed(ctx, db, env, p, fileName, nil)
}

// SubmitProbed is Submit recording with the task the door's probe of the
// video (media.ProbeRecord's JSON; nil for none), which extract_audio
// reuses for the same bytes instead of starting ffprobe again.
func SubmitProbed(ctx context.Context, db Beginner, env *wire.Envelope, p wire.ExtractAudio, fileName string, probe []byte) ([]int64, error) {
	body, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode %s message: %w", env.Step, err)
	}
	// The database going away under the commit (a failover) is ridden
	// over: the transaction is sent again once a primary answers. When the
	// earlier try's outcome is unknown, the task's row says whether it was
	// applied: the task id is this submission's own, so a row with it is
	// that try's, and nothing is created twice (its outbox rows are left to
	// the sweep).
	var ids []int64
	err = store.RideOver(ctx, store.FailoverWait, func(ctx context.Context, unknown bool) error {
		ids = nil
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			res, err := Apply(ctx, tx, Create(Details{ID: env.TaskID, SourceLanguage: p.SourceLanguage,
				TargetLanguage: p.TargetLanguage, SpeakerID: p.SpeakerID, SourceVideoKey: p.SourceVideoKey,
				OutputVideoKey: wire.DefaultKeys(env.TaskID).OutputVideo, TraceID: env.TraceID, Targets: p.Targets(),
				Review: p.Review, FileName: fileName, SourceProbe: probe}))
			if err != nil {
				return err
			}
			if !res.Changed && unknown {
				return errCreatedBefore
			}
			if !res.Changed {
				return fmt.Errorf("create task %s: %w", env.TaskID, ErrExists)
			}
			if err := savePlan(ctx, tx, env.TaskID, p); err != nil {
				return err
			}
			first := outbox.New(wire.Exchange, env.RoutingKey(), body)
			if err := outbox.Add(ctx, tx, first); err != nil {
				return err
			}
			ids = []int64{res.EventID, first.ID}
			return nil
		})
		if errors.Is(err, errCreatedBefore) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// savePlan records the plan of the task id that p submits, when it has one.
func savePlan(ctx context.Context, tx pgx.Tx, id uuid.UUID, p wire.ExtractAudio) error {
	plan := PlanOf(p, p.SourceLanguage)
	if plan.IsZero() {
		return nil
	}
	sql, args := SavePlan(id, plan)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("record plan of task %s: %w", id, err)
	}
	return nil
}
