package task

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Plan is what a task asks beyond its languages (the task_plans row): the
// steps it skips, the subtitle files it starts from and the burned-in
// subtitles it wants. The runtime counts a skipped step as done
// (step_succeeded), so that the steps after it go on and no attempt of it
// is ever made; the read model shows it as skipped.
type Plan struct {
	// Skipped are the steps left out, in pipeline order: asr for a task
	// from subtitles in the source language, asr and translate for
	// subtitles in the target language.
	Skipped []string `json:"skippedSteps,omitempty"`
	// SubtitlesKey and SubtitlesLanguage name the subtitle file the task
	// starts from and its language; SourceSubtitlesKey the second file, with
	// the source text, of a target-language one.
	SubtitlesKey       string `json:"subtitlesKey,omitempty"`
	SubtitlesLanguage  string `json:"subtitlesLanguage,omitempty"`
	SourceSubtitlesKey string `json:"sourceSubtitlesKey,omitempty"`
	// BurnSubtitles is wire.BurnTarget, wire.BurnBilingual or "".
	BurnSubtitles string `json:"burnSubtitles,omitempty"`
}

// PlanOf is the plan of the task that payload p starts, whose source
// language (settled: the payload's, else the default) is source.
func PlanOf(p wire.ExtractAudio, source string) Plan {
	pl := Plan{Skipped: p.SkippedSteps(source), SubtitlesKey: p.SubtitlesKey, SourceSubtitlesKey: p.SourceSubtitlesKey,
		BurnSubtitles: p.BurnSubtitles}
	if p.SubtitlesKey != "" {
		pl.SubtitlesLanguage = cmp.Or(p.SubtitlesLanguage, source)
	}
	return pl
}

// IsZero reports whether the plan asks nothing: the task runs every step.
func (p Plan) IsZero() bool {
	return len(p.Skipped) == 0 && p.SubtitlesKey == "" && p.BurnSubtitles == ""
}

// Skips reports whether the plan leaves step out.
func (p Plan) Skips(step string) bool { return slices.Contains(p.Skipped, step) }

// SavePlan returns the statement that records the plan of task id (an
// upsert: the door's record at submit, extract_audio's in its success
// transaction), for a transaction of the caller's (tx.Exec, a step's
// Message.Exec).
func SavePlan(id uuid.UUID, p Plan) (string, []any) {
	skipped := p.Skipped
	if skipped == nil {
		skipped = []string{}
	}
	return savePlanSQL, []any{id, skipped, p.SubtitlesKey, p.SubtitlesLanguage, p.SourceSubtitlesKey, p.BurnSubtitles}
}

const savePlanSQL = `INSERT INTO task_plans (task_id, skipped_steps, subtitles_key, subtitles_language, source_subtitles_key, burn_subtitles)
	VALUES ($1, $2, $3, $4, $5, $6)
	ON CONFLICT (task_id) DO UPDATE SET skipped_steps = EXCLUDED.skipped_steps, subtitles_key = EXCLUDED.subtitles_key,
	    subtitles_language = EXCLUDED.subtitles_language, source_subtitles_key = EXCLUDED.source_subtitles_key,
	    burn_subtitles = EXCLUDED.burn_subtitles`

// LoadPlan reads the plan of task id: the zero Plan when it has none.
func LoadPlan(ctx context.Context, q Querier, id uuid.UUID) (Plan, error) {
	var p Plan
	err := q.QueryRow(ctx, `SELECT skipped_steps, subtitles_key, subtitles_language, source_subtitles_key, burn_subtitles
		FROM task_plans WHERE task_id = $1`, id).
		Scan(&p.Skipped, &p.SubtitlesKey, &p.SubtitlesLanguage, &p.SourceSubtitlesKey, &p.BurnSubtitles)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Plan{}, nil
	case err != nil:
		return Plan{}, fmt.Errorf("read plan of task %s: %w", id, err)
	}
	if len(p.Skipped) == 0 {
		p.Skipped = nil
	}
	return p, nil
}
