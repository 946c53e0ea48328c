package task

import (
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// LockStatus locks the task's row in q's transaction (until it ends) and
// returns its status: what an operator's action that decides by the status
// (a retry, a dead letter's replay) reads before it applies a transition.
// A task without a row is ErrNotFound.
func LockStatus(ctx context.Context, q Querier, id uuid.UUID) (string, error) {
	var status string
	err := q.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1 FOR UPDATE`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read task %s: %w", id, err)
	}
	return status, nil
}

// FirstMessage rebuilds a task's extract_audio message from its row, as it
// was submitted.
func FirstMessage(ctx context.Context, q Querier, id uuid.UUID) (*wire.Envelope, error) {
	var p wire.ExtractAudio
	var trace string
	if err := q.QueryRow(ctx, `SELECT source_video_key, source_language, target_language, speaker_id, trace_id
		FROM tasks WHERE id = $1`, id).Scan(&p.SourceVideoKey, &p.SourceLanguage, &p.TargetLanguage, &p.SpeakerID,
		&trace); err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	p.OutputAudioKey = wire.DefaultKeys(id).SourceAudio
	return wire.New(wire.StepExtractAudio, id, trace, p)
}
