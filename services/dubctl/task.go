package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Task statuses (the tasks.status column).
const (
	taskQueued       = "queued"
	taskRunning      = "running"
	taskCompensating = "compensating"
	taskDone         = "done"
	taskFailed       = "failed"
	taskCancelled    = "cancelled"
)

// errTaskNotFound is returned for a task id with no tasks row.
var errTaskNotFound = errors.New("task not found")

// taskView is everything dubctl shows about a task; it is also the JSON
// shape of `status --json` and `wait --json`.
type taskView struct {
	TaskID         uuid.UUID       `json:"task_id"`
	Status         string          `json:"status"`
	SourceLanguage string          `json:"source_language"`
	TargetLanguage string          `json:"target_language"`
	SpeakerID      string          `json:"speaker_id,omitempty"`
	SourceVideoKey string          `json:"source_video_key"`
	OutputVideoKey string          `json:"output_video_key"`
	Error          string          `json:"error"`
	Result         json.RawMessage `json:"result"`
	TraceID        string          `json:"trace_id"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`

	// OutputPath and SubtitlePaths are the local files wait downloaded.
	OutputPath    string   `json:"output_path,omitempty"`
	SubtitlePaths []string `json:"subtitle_paths,omitempty"`

	Steps    []stepView    `json:"steps"`
	Attempts []attemptView `json:"attempts"`
	Segments segmentCounts `json:"segments"`

	// Languages and OutputPaths: a task of several languages (languages.go).
	Languages   *languagesView    `json:"languages,omitempty"`
	OutputPaths map[string]string `json:"output_paths,omitempty"`
}

// stepView sums up one pipeline step over its attempts and parts.
type stepView struct {
	Step string `json:"step"`
	// Status is succeeded (every part has), running, parked, failed (no
	// attempt running, the last one failed) or pending (no attempt yet).
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	Parts      int        `json:"parts"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// attemptView is one row of task_steps.
type attemptView struct {
	Step       string     `json:"step"`
	Part       string     `json:"part"`
	Attempt    int        `json:"attempt"`
	Status     string     `json:"status"`
	Worker     string     `json:"worker"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      string     `json:"error,omitempty"`
}

// segmentCounts counts a task's segments by progress.
type segmentCounts struct {
	Total       int `json:"total"`
	Translated  int `json:"translated"`
	Synthesized int `json:"synthesized"`
	FailedTTS   int `json:"failed_tts"`
}

// stepsDone counts the pipeline steps that succeeded.
func (v *taskView) stepsDone() int {
	n := 0
	for _, s := range v.Steps {
		if s.Status == "succeeded" {
			n++
		}
	}
	return n
}

// currentStep names the first pipeline step that has not succeeded.
func (v *taskView) currentStep() string {
	for _, s := range v.Steps {
		if s.Status != "succeeded" {
			return s.Step
		}
	}
	return ""
}

// noSpeech reports whether the task ended with the "no speech" result.
func (v *taskView) noSpeech() bool {
	var r struct {
		NoSpeech bool `json:"no_speech"`
	}
	_ = json.Unmarshal(v.Result, &r)
	return r.NoSpeech
}

// loadTask reads the task, its attempts and its segment counts in one
// snapshot.
func loadTask(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) (*taskView, error) {
	v := &taskView{TaskID: id}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `SELECT status, source_language, target_language, speaker_id,
				source_video_key, output_video_key, error, result, trace_id, created_at, updated_at
				FROM tasks WHERE id = $1`, id).Scan(&v.Status, &v.SourceLanguage, &v.TargetLanguage,
				&v.SpeakerID, &v.SourceVideoKey, &v.OutputVideoKey, &v.Error, &v.Result, &v.TraceID,
				&v.CreatedAt, &v.UpdatedAt)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: %s", errTaskNotFound, id)
			}
			if err != nil {
				return fmt.Errorf("read task %s: %w", id, err)
			}
			if v.Attempts, err = loadAttempts(ctx, tx, id); err != nil {
				return err
			}
			if v.Steps, err = loadSteps(ctx, tx, id, v.Attempts); err != nil {
				return err
			}
			err = tx.QueryRow(ctx, `SELECT count(*), count(mt_text), count(tts_audio_key),
				count(*) FILTER (WHERE tts_audio_key IS NULL AND tts_failures > 0)
				FROM segments WHERE task_id = $1`, id).Scan(&v.Segments.Total, &v.Segments.Translated,
				&v.Segments.Synthesized, &v.Segments.FailedTTS)
			if err != nil {
				return fmt.Errorf("count segments of %s: %w", id, err)
			}
			v.Languages, err = loadLanguages(ctx, tx, id)
			return err
		})
	if err != nil {
		return nil, err
	}
	return v, nil
}

func loadAttempts(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]attemptView, error) {
	rows, err := tx.Query(ctx, `SELECT step, part, attempt, status, worker, started_at, finished_at, error
		FROM task_steps WHERE task_id = $1 ORDER BY started_at, id`, id)
	if err != nil {
		return nil, fmt.Errorf("read steps of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (attemptView, error) {
		var a attemptView
		err := r.Scan(&a.Step, &a.Part, &a.Attempt, &a.Status, &a.Worker, &a.StartedAt, &a.FinishedAt, &a.Error)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read steps of %s: %w", id, err)
	}
	if out == nil {
		out = []attemptView{}
	}
	return out, nil
}

// loadSteps sums up each pipeline step; step_succeeded (the runtime's own
// definition) says whether all of a step's parts have succeeded.
func loadSteps(ctx context.Context, tx pgx.Tx, id uuid.UUID, attempts []attemptView) ([]stepView, error) {
	out := make([]stepView, 0, len(wire.Pipeline))
	for _, name := range wire.Pipeline {
		s := stepView{Step: name, Status: "pending"}
		var succeeded bool
		if err := tx.QueryRow(ctx, `SELECT step_succeeded($1, $2)`, id, name).Scan(&succeeded); err != nil {
			return nil, fmt.Errorf("read step %s of %s: %w", name, id, err)
		}
		parts := map[string]bool{}
		var running, parked, failed bool
		for _, a := range attempts {
			if a.Step != name {
				continue
			}
			s.Attempts++
			parts[a.Part] = true
			if s.StartedAt == nil || a.StartedAt.Before(*s.StartedAt) {
				t := a.StartedAt
				s.StartedAt = &t
			}
			if a.FinishedAt != nil && (s.FinishedAt == nil || a.FinishedAt.After(*s.FinishedAt)) {
				t := *a.FinishedAt
				s.FinishedAt = &t
			}
			switch a.Status {
			case "running":
				running = true
			case "parked":
				parked = true
			case "failed":
				failed = true
			}
		}
		s.Parts = len(parts)
		switch {
		case succeeded:
			s.Status = "succeeded"
		case running:
			s.Status, s.FinishedAt = "running", nil
		case parked:
			s.Status = "parked"
		case failed:
			s.Status = "failed"
		case s.Attempts > 0:
			s.Status, s.FinishedAt = "running", nil // some parts succeeded, others not started
		}
		out = append(out, s)
	}
	return out, nil
}

// taskSummary is one line of `list`.
type taskSummary struct {
	TaskID         uuid.UUID `json:"task_id"`
	Status         string    `json:"status"`
	SourceLanguage string    `json:"source_language"`
	TargetLanguage string    `json:"target_language"`
	OutputVideoKey string    `json:"output_video_key"`
	Error          string    `json:"error"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// listTasks returns the most recent tasks, newest first, optionally of one
// status.
func listTasks(ctx context.Context, pool *pgxpool.Pool, status string, limit int) ([]taskSummary, error) {
	rows, err := pool.Query(ctx, `SELECT id, status, source_language, target_language, output_video_key,
		error, created_at, updated_at FROM tasks WHERE $1 = '' OR status = $1
		ORDER BY created_at DESC, id LIMIT $2`, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (taskSummary, error) {
		var t taskSummary
		err := r.Scan(&t.TaskID, &t.Status, &t.SourceLanguage, &t.TargetLanguage, &t.OutputVideoKey,
			&t.Error, &t.CreatedAt, &t.UpdatedAt)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	if out == nil {
		out = []taskSummary{}
	}
	return out, nil
}

// parseTaskID parses a task id argument (a usage error when malformed).
func parseTaskID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usageError(fmt.Errorf("task id %q: want a UUID", s))
	}
	return id, nil
}
