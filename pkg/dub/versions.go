package dub

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Version is one output of a task.
type Version struct {
	Version        int    `json:"version"`
	OutputVideoKey string `json:"output_video_key"`
	DubAudioKey    string `json:"dub_audio_key"`
	// Ready reports whether the version's video was written (its
	// mux_video part succeeded).
	Ready bool `json:"ready"`
	// SegmentIdx, PreviousText and Text say which line the version
	// re-dubbed (nil for the first dub).
	SegmentIdx   *int      `json:"segment_idx,omitempty"`
	PreviousText *string   `json:"previous_text,omitempty"`
	Text         *string   `json:"text,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// Versions returns the task's outputs, oldest first. A task never re-dubbed
// has no recorded version: its output, once done, is listed as version 1.
func Versions(ctx context.Context, db Querier, taskID uuid.UUID) ([]Version, error) {
	if err := exists(ctx, db, taskID); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT v.version, v.output_video_key, v.dub_audio_key,
		EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = v.task_id AND s.step = 'mux_video'
		         AND s.part = CASE WHEN v.version = 1 THEN '' ELSE 'v' || v.version END AND s.status = 'succeeded'),
		v.segment_idx, v.previous_text, v.text, v.created_at
		FROM output_versions v WHERE v.task_id = $1
	UNION ALL
	SELECT 1, t.output_video_key, '', true, NULL, NULL, NULL, t.updated_at FROM tasks t
	 WHERE t.id = $1 AND t.status = 'done' AND NOT EXISTS (SELECT 1 FROM output_versions v WHERE v.task_id = t.id)
	ORDER BY 1`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read versions of %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Version, error) {
		var v Version
		err := r.Scan(&v.Version, &v.OutputVideoKey, &v.DubAudioKey, &v.Ready, &v.SegmentIdx, &v.PreviousText,
			&v.Text, &v.CreatedAt)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("read versions of %s: %w", taskID, err)
	}
	if out == nil {
		out = []Version{}
	}
	return out, nil
}
