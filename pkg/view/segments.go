package view

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Querier reads rows: a pool, a connection or a transaction (Query and
// QueryRow, as the step attempts' owner reads them).
type Querier = attempt.Reader

// Segment is one line of a dub as people see it.
type Segment struct {
	// N numbers the segment from 1 in timeline order: the number redub
	// takes.
	N int `json:"n"`
	// Idx is the segment's index in the pipeline (segments.idx, object
	// keys); people use N.
	Idx int `json:"idx"`
	// StartMS and EndMS place the source line in the video.
	StartMS int `json:"startMs"`
	EndMS   int `json:"endMs"`
	// Speaker is the speaker turn found for the line ("" when unknown),
	// Voice the voice it was synthesized with.
	Speaker string `json:"speaker"`
	Voice   string `json:"voice"`
	// SourceText is what was said, Text the translation that is spoken
	// (null while not translated yet).
	SourceText string  `json:"sourceText"`
	Text       *string `json:"text"`
	// Synthesized reports whether the line has its audio.
	Synthesized bool `json:"synthesized"`
	// Fit is what synthesis recorded about the clip and its slot (engine
	// settings, slot_ms, ...), null before synthesis.
	Fit json.RawMessage `json:"fit"`
	// Error is the last synthesis error of the line, if any.
	Error string `json:"error"`
}

// Segments returns the task's segments in order, numbered from 1. A task
// that does not exist is ErrNotFound; a task without segments (yet) gives
// an empty list.
func Segments(ctx context.Context, db Querier, taskID uuid.UUID) ([]Segment, error) {
	if err := exists(ctx, db, taskID); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT idx, start_ms, end_ms, speaker, voice, src_text, mt_text,
		tts_audio_key IS NOT NULL, tts_params_json, tts_error
		FROM segments WHERE task_id = $1 ORDER BY idx`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", taskID, err)
	}
	n := 0
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Segment, error) {
		var s Segment
		var fit []byte
		err := r.Scan(&s.Idx, &s.StartMS, &s.EndMS, &s.Speaker, &s.Voice, &s.SourceText, &s.Text,
			&s.Synthesized, &fit, &s.Error)
		n++
		s.N = n
		if fit != nil {
			s.Fit = json.RawMessage(fit)
		}
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", taskID, err)
	}
	if out == nil {
		out = []Segment{}
	}
	return out, nil
}

// Version is one output of a task: the first dub or a re-dub.
type Version struct {
	Version int `json:"version"`
	// OutputVideoKey and DubAudioKey name the version's objects once it is
	// Ready ("" before: they do not exist yet).
	OutputVideoKey string `json:"outputVideoKey"`
	DubAudioKey    string `json:"dubAudioKey"`
	// Ready reports whether the version's video was written (its
	// mux_video part succeeded).
	Ready bool `json:"ready"`
	// BurnedVideoKey names the version's output with subtitles drawn in
	// (final.burned.mp4) once Ready, for a task that asked for it; "" else.
	BurnedVideoKey string `json:"burnedVideoKey"`
	// Segment (numbered from 1, as Segments numbers them), PreviousText
	// and Text say which line the version re-dubbed (null for the first
	// dub).
	Segment      *int      `json:"segment"`
	PreviousText *string   `json:"previousText"`
	Text         *string   `json:"text"`
	CreatedAt    time.Time `json:"createdAt"`
}

// Versions returns the task's outputs, oldest first. A task never re-dubbed
// has no recorded version: its output, once its mux_video succeeded, is
// listed as version 1 (a task done without one — one that found no speech
// before that was a failure — lists none). A version whose video is not
// written yet (Ready false) lists no keys: every key listed names an object
// that exists.
func Versions(ctx context.Context, db Querier, taskID uuid.UUID) ([]Version, error) {
	if err := exists(ctx, db, taskID); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT version, CASE WHEN ready THEN output_video_key ELSE '' END,
		CASE WHEN ready THEN dub_audio_key ELSE '' END, ready, segment, previous_text, text, created_at FROM (
	SELECT v.version, v.output_video_key, v.dub_audio_key,
		`+attempt.SucceededSQL("v.task_id", "'mux_video'", "CASE WHEN v.version = 1 THEN '' ELSE 'v' || v.version END")+` AS ready,
		CASE WHEN v.segment_idx IS NULL THEN NULL ELSE
		  (SELECT count(*)::int FROM segments g WHERE g.task_id = v.task_id AND g.idx <= v.segment_idx) END AS segment,
		v.previous_text, v.text, v.created_at
		FROM output_versions v WHERE v.task_id = $1
	UNION ALL
	SELECT 1, t.output_video_key, '', true, NULL, NULL, NULL, t.updated_at FROM tasks t
	 WHERE t.id = $1 AND t.status = 'done' AND cardinality(t.targets) = 0 AND t.output_video_key <> ''
	   AND `+attempt.SucceededSQL("t.id", "'mux_video'", "''")+`
	   AND NOT EXISTS (SELECT 1 FROM output_versions v WHERE v.task_id = t.id)) vs
	ORDER BY version`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read versions of %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Version, error) {
		var v Version
		err := r.Scan(&v.Version, &v.OutputVideoKey, &v.DubAudioKey, &v.Ready, &v.Segment, &v.PreviousText,
			&v.Text, &v.CreatedAt)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("read versions of %s: %w", taskID, err)
	}
	if out == nil {
		out = []Version{}
	}
	plan, err := task.LoadPlan(ctx, db, taskID)
	if err != nil {
		return nil, err
	}
	for i, v := range out {
		if v.Ready && plan.BurnSubtitles != "" {
			out[i].BurnedVideoKey = wire.BurnedKey(v.OutputVideoKey)
		}
	}
	return out, nil
}

// exists checks that the task exists.
func exists(ctx context.Context, db Querier, taskID uuid.UUID) error {
	ok, err := TaskExists(ctx, db, taskID)
	if err == nil && !ok {
		err = fmt.Errorf("task %s: %w", taskID, ErrNotFound)
	}
	return err
}

// TaskExists reports whether the task has a row.
func TaskExists(ctx context.Context, db Querier, taskID uuid.UUID) (bool, error) {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE id = $1)`, taskID).Scan(&ok); err != nil {
		return false, fmt.Errorf("read task %s: %w", taskID, err)
	}
	return ok, nil
}

// Now reads the database's clock: the one the tasks' and attempts' times
// are written by, so the one to read changes "since" against.
func Now(ctx context.Context, db Querier) (time.Time, error) {
	var now time.Time
	if err := db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return now, fmt.Errorf("read the time: %w", err)
	}
	return now, nil
}
