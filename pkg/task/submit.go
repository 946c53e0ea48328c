package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
)

// Beginner starts transactions (a *pgxpool.Pool).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ErrExists is returned by Submit for a task id that is taken.
var ErrExists = errors.New("task exists already")

// Submit creates the task of env (queued, announced by event.task.queued)
// from its extract_audio payload p and adds env, its first message, to the
// outbox, in one transaction. A payload naming several target_languages
// makes a parent task (see Spawn): the video is stored once, under the
// parent's key; the asr worker copies it to each child's key where the
// parent's asr completes (services/asr, spawnChildren). It returns the outbox rows to publish after
// the commit (outbox.Flush; a sweep publishes them otherwise). A task that
// exists already is refused. The task's plan (PlanOf: the steps it skips,
// the subtitles it starts from, the burned-in subtitles it wants) is
// recorded in the same transaction. fileName is the name the video was uploaded
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
	var ids []int64
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		res, err := Apply(ctx, tx, Create(Details{ID: env.TaskID, SourceLanguage: p.SourceLanguage,
			TargetLanguage: p.TargetLanguage, SpeakerID: p.SpeakerID, SourceVideoKey: p.SourceVideoKey,
			OutputVideoKey: wire.DefaultKeys(env.TaskID).OutputVideo, TraceID: env.TraceID, Targets: p.Targets(),
			Review: p.Review, FileName: fileName, SourceProbe: probe}))
		if err != nil {
			return err
		}
		if !res.Changed {
			return fmt.Errorf("create task %s: %w", env.TaskID, ErrExists)
		}
		if plan := PlanOf(p, p.SourceLanguage); !plan.IsZero() {
			sql, args := SavePlan(env.TaskID, plan)
			if _, err := tx.Exec(ctx, sql, args...); err != nil {
				return fmt.Errorf("record plan of task %s: %w", env.TaskID, err)
			}
		}
		first := outbox.New(wire.Exchange, env.RoutingKey(), body)
		if err := outbox.Add(ctx, tx, first); err != nil {
			return err
		}
		ids = []int64{res.EventID, first.ID}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
