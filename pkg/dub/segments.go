package dub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned for a task that does not exist.
var ErrNotFound = errors.New("no such task")

// Querier reads rows: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Segment is one line of a dub as people see it.
type Segment struct {
	// N numbers the segment from 1 in timeline order; Redub takes it.
	N int `json:"n"`
	// Idx is the segment's index in the pipeline (segments.idx).
	Idx int `json:"idx"`
	// StartMS and EndMS place the source line in the video.
	StartMS int `json:"start_ms"`
	EndMS   int `json:"end_ms"`
	// Speaker is the speaker turn found for the line ("" when unknown),
	// Voice the voice it was synthesized with.
	Speaker string `json:"speaker"`
	Voice   string `json:"voice"`
	// SourceText is what was said, Text the translation that is spoken
	// (nil while not translated yet).
	SourceText string  `json:"source_text"`
	Text       *string `json:"text"`
	// Synthesized reports whether the line has its audio.
	Synthesized bool `json:"synthesized"`
	// Fit is what synthesis recorded about the clip and its slot
	// (tts_params_json: engine settings, slot_ms, ...), nil before synthesis.
	Fit json.RawMessage `json:"fit,omitempty"`
	// Error is the last synthesis error of the line, if any.
	Error string `json:"error,omitempty"`
}

// Segments returns the task's segments in order, numbered from 1. A task
// that does not exist is ErrNotFound; a task without segments (yet) gives
// an empty list.
func Segments(ctx context.Context, db Querier, taskID uuid.UUID) ([]Segment, error) {
	if err := exists(ctx, db, taskID); err != nil {
		return nil, err
	}
	n := 0
	out, err := ReadSegments(ctx, db, taskID, func(r pgx.CollectableRow) (Segment, error) {
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
	}, `SELECT idx, start_ms, end_ms, speaker, voice, src_text, mt_text,
		tts_audio_key IS NOT NULL, tts_params_json, tts_error
		FROM segments WHERE task_id = $1 ORDER BY idx`)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Segment{}
	}
	return out, nil
}

// exists checks that the task exists.
func exists(ctx context.Context, db Querier, taskID uuid.UUID) error {
	var one int
	err := db.QueryRow(ctx, `SELECT 1 FROM tasks WHERE id = $1`, taskID).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("task %s: %w", taskID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("read task %s: %w", taskID, err)
	}
	return nil
}
