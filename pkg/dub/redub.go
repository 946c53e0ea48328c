package dub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// MaxTextLength is the longest translation Redub accepts, in characters.
const MaxTextLength = 2000

// ErrNoSegment is returned by Redub for a segment number the task does not
// have.
var ErrNoSegment = errors.New("no such segment")

// ErrInvalidText is returned by Redub for a text it refuses (empty, too
// long, against the text rule: CheckText).
var ErrInvalidText = errors.New("invalid text")

// ErrParent is returned by Redub for a parent task (one that dubs into
// several languages): its lines are re-dubbed in each child, the error
// names them.
var ErrParent = errors.New("a parent task is not re-dubbed")

// Beginner starts a transaction: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Redubbed is what Redub started.
type Redubbed struct {
	TaskID uuid.UUID `json:"taskId"`
	// Version is the output version the re-dub builds (2 for the first
	// re-dub); earlier versions' objects stay where they are.
	Version int `json:"version"`
	// N (numbered from 1) and Idx (segments.idx) name the segment
	// changed; PreviousText is its translation before, Text the new one.
	N            int     `json:"segment"`
	Idx          int     `json:"-"`
	PreviousText *string `json:"previousText"`
	Text         string  `json:"text"`
	// OutputVideoKey is where the new version's video will be written.
	OutputVideoKey string `json:"outputVideoKey"`
	// Outbox lists the outbox rows (the task.redubbing event and the tts
	// message): run Redub inside outbox.Commit's transaction, which
	// publishes them after the commit, or leave them to a worker's sweep.
	Outbox []int64 `json:"-"`
}

// Redub changes the translation of segment n (numbered from 1, as Segments
// numbers them) of a done task to text, and starts the next output version:
// in one transaction the task goes running (task.Redub, event
// task.redubbing), the segment gets its new text and loses its audio, the
// version is recorded in output_versions, and one tts message for part
// "v<version>" is added to the outbox. The tts worker then synthesizes that
// segment only (the only one without audio) and emits the version's
// mux_video, which writes the new output under outputs/{task_id}/v<n>/ and
// sets the task done again. A task that is not done is refused
// (task.ErrRefused), a parent task ErrParent naming its children, an empty
// or too long text, or one the text rule refuses (CheckText: not UTF-8, a
// control character, a bidirectional override), ErrInvalidText; a missing
// task is ErrNotFound, a missing segment ErrNoSegment.
func Redub(ctx context.Context, db Beginner, taskID uuid.UUID, n int, text string) (*Redubbed, error) {
	text = strings.TrimSpace(text)
	if err := CheckText(text); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidText, err)
	}
	if n < 1 {
		return nil, fmt.Errorf("segment %d: %w: segments are numbered from 1", n, ErrNoSegment)
	}
	if text == "" {
		return nil, fmt.Errorf("%w: the text is empty; give the line's new translation", ErrInvalidText)
	}
	if l := utf8.RuneCountInString(text); l > MaxTextLength {
		return nil, fmt.Errorf("%w: %d characters, at most %d", ErrInvalidText, l, MaxTextLength)
	}
	var r *Redubbed
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		r, err = redub(ctx, tx, taskID, n, text)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// redub does Redub's work inside tx.
func redub(ctx context.Context, tx pgx.Tx, taskID uuid.UUID, n int, text string) (*Redubbed, error) {
	if err := refuseParent(ctx, tx, taskID); err != nil {
		return nil, err
	}
	res, err := task.Apply(ctx, tx, task.Redub(task.Ref{ID: taskID}))
	var refused *task.RefusedError
	switch {
	case errors.Is(err, task.ErrNotFound):
		return nil, fmt.Errorf("task %s: %w", taskID, ErrNotFound)
	case errors.As(err, &refused):
		return nil, fmt.Errorf("redub task %s: it is %s, only a done task can be re-dubbed: %w", taskID, refused.From, err)
	case err != nil:
		return nil, err
	}
	r := &Redubbed{TaskID: taskID, N: n, Text: text}
	if r.Idx, r.PreviousText, err = nth(ctx, tx, taskID, n); err != nil {
		return nil, err
	}
	if r.Version, err = nextVersion(ctx, tx, taskID); err != nil {
		return nil, err
	}
	keys := wire.VersionKeys(taskID, r.Version)
	r.OutputVideoKey = keys.OutputVideo
	if err := segment.Redubbed(ctx, tx, taskID, r.Idx, text); err != nil {
		return nil, fmt.Errorf("change segment %d of %s: %w", n, taskID, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO output_versions (task_id, version, output_video_key, dub_audio_key,
		segment_idx, previous_text, text) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		taskID, r.Version, keys.OutputVideo, keys.DubAudio, r.Idx, r.PreviousText, text); err != nil {
		return nil, fmt.Errorf("record version %d of %s: %w", r.Version, taskID, err)
	}
	id, err := addTTS(ctx, tx, taskID, r.Version)
	if err != nil {
		return nil, err
	}
	r.Outbox = append(r.Outbox, res.EventID, id)
	return r, nil
}

// refuseParent refuses a parent task, naming its children: each language
// is re-dubbed in its own child task.
func refuseParent(ctx context.Context, tx pgx.Tx, taskID uuid.UUID) error {
	f, err := task.FamilyOf(ctx, tx, taskID)
	switch {
	case errors.Is(err, task.ErrNotFound):
		return fmt.Errorf("task %s: %w", taskID, ErrNotFound)
	case err != nil:
		return err
	case len(f.Targets) == 0:
		return nil
	}
	if len(f.Children) == 0 {
		return fmt.Errorf("redub task %s: %w: it dubs into %s through child tasks, which start where its transcription ends",
			taskID, ErrParent, strings.Join(f.Targets, ", "))
	}
	names := make([]string, 0, len(f.Children))
	for _, c := range f.Children {
		names = append(names, c.TargetLanguage+" "+c.ID.String())
	}
	return fmt.Errorf("redub task %s: %w: re-dub one of its children: %s", taskID, ErrParent, strings.Join(names, ", "))
}

// nth returns the index and translation of the task's n-th segment.
func nth(ctx context.Context, tx pgx.Tx, taskID uuid.UUID, n int) (int, *string, error) {
	var idx int
	var text *string
	err := tx.QueryRow(ctx, `SELECT idx, mt_text FROM segments WHERE task_id = $1 ORDER BY idx
		OFFSET $2 LIMIT 1 FOR UPDATE`, taskID, n-1).Scan(&idx, &text)
	if errors.Is(err, pgx.ErrNoRows) {
		var count int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM segments WHERE task_id = $1`, taskID).Scan(&count); err != nil {
			return 0, nil, fmt.Errorf("count segments of %s: %w", taskID, err)
		}
		return 0, nil, fmt.Errorf("segment %d of task %s: %w (it has %d)", n, taskID, ErrNoSegment, count)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read segment %d of %s: %w", n, taskID, err)
	}
	return idx, text, nil
}

// nextVersion records the task's current output as version 1 if no version
// is recorded yet, and returns the number of the next one. The task's row
// is locked (task.Redub), so two re-dubs never take the same number.
func nextVersion(ctx context.Context, tx pgx.Tx, taskID uuid.UUID) (int, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO output_versions (task_id, version, output_video_key, dub_audio_key, created_at)
		SELECT id, 1, output_video_key, $2, updated_at FROM tasks WHERE id = $1
		ON CONFLICT DO NOTHING`, taskID, wire.DefaultKeys(taskID).DubAudio); err != nil {
		return 0, fmt.Errorf("record version 1 of %s: %w", taskID, err)
	}
	var v int
	if err := tx.QueryRow(ctx, `SELECT max(version) + 1 FROM output_versions WHERE task_id = $1`, taskID).Scan(&v); err != nil {
		return 0, fmt.Errorf("number the next version of %s: %w", taskID, err)
	}
	return v, nil
}

// addTTS adds the version's tts message to the outbox and records it as a
// part of the tts step (attempt.AddPart, with the message for re-drives), so
// that mux_video waits for it and the reconciler finds it if it is lost.
func addTTS(ctx context.Context, tx pgx.Tx, taskID uuid.UUID, version int) (int64, error) {
	var speaker, trace string
	if err := tx.QueryRow(ctx, `SELECT speaker_id, trace_id FROM tasks WHERE id = $1`, taskID).Scan(&speaker, &trace); err != nil {
		return 0, fmt.Errorf("read task %s: %w", taskID, err)
	}
	env, err := wire.New(wire.StepTTS, taskID, trace, wire.TTS{TaskID: taskID, SpeakerID: speaker, Version: version})
	if err != nil {
		return 0, fmt.Errorf("build tts message: %w", err)
	}
	body, err := json.Marshal(env)
	if err != nil {
		return 0, fmt.Errorf("encode tts message: %w", err)
	}
	if err := attempt.AddPart(taskID, wire.StepTTS, wire.VersionPart(version), body).Exec(ctx, tx); err != nil {
		return 0, fmt.Errorf("record tts part of %s: %w", taskID, err)
	}
	o := outbox.New(wire.Exchange, wire.RoutingKey(wire.StepTTS), body)
	if err := outbox.Add(ctx, tx, o); err != nil {
		return 0, err
	}
	return o.ID, nil
}
