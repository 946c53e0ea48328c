package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned for a task (or dead letter) without a row:
// pkg/task's, so that every door refuses a missing task alike.
var ErrNotFound = task.ErrNotFound

// Task statuses, pkg/task's: the read model shows what pkg/task records.
const (
	Queued       = task.Queued
	Running      = task.Running
	Compensating = task.Compensating
	Review       = task.Review
	Done         = task.Done
	Failed       = task.Failed
	Cancelled    = task.Cancelled
)

// Statuses lists every task status, for filters.
var Statuses = task.Statuses

// Ended reports whether a task in status has ended for good (done, failed
// or cancelled); compensating waits for an operator but has not ended.
func Ended(status string) bool { return task.Ended(status) }

// Summary is a task without its steps: an item of the task list and the
// head of a task's detail.
type Summary struct {
	TaskID         uuid.UUID `json:"taskId"`
	Status         string    `json:"status"`
	SourceLanguage string    `json:"sourceLanguage"`
	TargetLanguage string    `json:"targetLanguage"`
	SpeakerID      string    `json:"speakerId"`
	Error          string    `json:"error"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// ParentTaskID is the parent of a child task (one language of a
	// submission into several), null for any other task.
	ParentTaskID *uuid.UUID `json:"parentTaskId"`
	// TargetLanguages are a parent's languages, [] for any other task.
	TargetLanguages []string `json:"targetLanguages"`
	// FileName is the name the video was uploaded as ("" when unknown:
	// a task submitted before names were kept, or from a bare object key).
	FileName string `json:"fileName"`
	// Review are the stages the task stops at for a person's edits
	// (transcript, translation; [] for none). ReviewStage is the stage it
	// waits in and ReviewSince since when, while its status is review (""
	// and null otherwise).
	Review      []string   `json:"review"`
	ReviewStage string     `json:"reviewStage"`
	ReviewSince *time.Time `json:"reviewSince"`
	// Project is the project the task belongs to (pkg/tenant).
	Project string `json:"project"`
}

// IsParent reports whether the task dubs into several languages through
// child tasks.
func (s *Summary) IsParent() bool { return len(s.TargetLanguages) > 0 }

// Task is everything known about a task: GET /api/tasks/{id} and
// `dubctl status --json`.
type Task struct {
	Summary
	SourceVideoKey string `json:"sourceVideoKey"`
	// OutputVideoKey is where the dub is written; "" for a parent, whose
	// outputs are its children's.
	OutputVideoKey string          `json:"outputVideoKey"`
	TraceID        string          `json:"traceId"`
	Result         json.RawMessage `json:"result"`
	// Steps are the pipeline steps the task runs, in order: a parent runs
	// extract_audio and asr only, its children the rest.
	Steps        []Step          `json:"steps"`
	Segments     SegmentCounts   `json:"segments"`
	TimingReport json.RawMessage `json:"timingReport"`
	// Links are presigned download links; only the console fills them.
	Links       Links        `json:"links"`
	DeadLetters []DeadLetter `json:"deadLetters"`
	// Languages is a parent's languages and children or a child's parent;
	// null for a task of one language.
	Languages *Languages `json:"languages"`
	// Waiting is set while a step waits for an engine of its pool (quota,
	// rate limit, no engine up): "waiting for quota until 14:00".
	Waiting *Wait `json:"waiting"`
	// Plan is what the task asks beyond its languages: the steps it skips
	// (Step.Status Skipped), the subtitles it starts from, the burned-in
	// subtitles it wants; null when it asks nothing.
	Plan *task.Plan `json:"plan"`
	// Stream is the task's growing stream (a long task's dub, playable
	// while it is made: pkg/stream); null for a task without one.
	Stream *Stream `json:"stream"`
}

// Stream is what a task shows of its growing stream.
type Stream struct {
	// PlayableSeconds is how much plays from the start.
	PlayableSeconds float64 `json:"playableSeconds"`
	// Ended says it will not grow: whole, or the task ended otherwise.
	Ended bool `json:"ended"`
	// PlaylistKey is the stored multivariant playlist ("" until its first
	// stretch is made); URL is where the console serves it (the console
	// fills it: GET /api/tasks/{id}/stream.m3u8).
	PlaylistKey string `json:"playlistKey"`
	URL         string `json:"url,omitempty"`
}

// Step is one pipeline step over its parts.
type Step struct {
	Step string `json:"step"`
	// Status is succeeded (every part has, by the runtime's own
	// step_succeeded), running, parked, failed (no attempt running, the
	// last one failed), pending (no attempt yet) or skipped (the task's
	// plan leaves it out: it never runs, and counts as done for the steps
	// after it).
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	DurationMS *int64     `json:"durationMs"`
	Parts      []Part     `json:"parts"`
}

// Part is one part of a step (a translate batch, a re-dub version; "" for
// a step not fanned out) with its attempts, oldest first.
type Part struct {
	Part     string    `json:"part"`
	Status   string    `json:"status"`
	Attempts []Attempt `json:"attempts"`
}

// Attempt is one attempt at a part of a step.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	Status     string     `json:"status"`
	Worker     string     `json:"worker"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	DurationMS *int64     `json:"durationMs"`
	Error      string     `json:"error"`
	// WaitReason and WaitUntil are set on an attempt that found no engine
	// of its pool able to serve (no_quota, rate_limit, no_engine): the
	// step goes on by itself at WaitUntil, without spending a retry.
	WaitReason string     `json:"waitReason"`
	WaitUntil  *time.Time `json:"waitUntil"`
	// QueueWaitMS is how long the attempt's message waited in its work
	// queue before this attempt claimed it: from when it was ready there
	// (published; a retry: back from its delay tier) to the claim. Null
	// when not measured (an outside publisher's retry, an older row).
	QueueWaitMS *int64 `json:"queueWaitMs"`
}

// Wait is why a task's step waits for an engine and until when.
type Wait struct {
	Step   string    `json:"step"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until"`
	// Message is the line the console and dubctl show, e.g. "waiting for
	// quota until 14:00 UTC".
	Message string `json:"message"`
}

// SegmentCounts counts a task's segments by progress.
type SegmentCounts struct {
	Total       int `json:"total"`
	Translated  int `json:"translated"`
	Synthesized int `json:"synthesized"`
	FailedTTS   int `json:"failedTts"`
}

// Links are presigned GET URLs of a task's objects (null where there is
// none).
type Links struct {
	Source   *string `json:"source"`
	Output   *string `json:"output"`
	DubAudio *string `json:"dubAudio"`
	// Subtitles are the SubRip and WebVTT files, by language then format.
	Subtitles    []SubtitleLink `json:"subtitles"`
	TimingReport *string        `json:"timingReport"`
	// Burned is the output with subtitles drawn in, when the task asked
	// for it (final.burned.mp4).
	Burned *string `json:"burned"`
}

// SubtitleLink is one subtitle file: its language (or "bilingual"), its
// format (srt, vtt), its object key and a presigned URL.
type SubtitleLink struct {
	Language string `json:"language"`
	Format   string `json:"format"`
	Key      string `json:"key"`
	URL      string `json:"url"`
}

// Languages is a parent's languages and children, or a child's parent.
type Languages struct {
	ParentTaskID    *uuid.UUID `json:"parentTaskId"`
	TargetLanguages []string   `json:"targetLanguages"`
	Children        []Child    `json:"children"`
}

// Child is one child task of a parent.
type Child struct {
	TaskID         uuid.UUID       `json:"taskId"`
	TargetLanguage string          `json:"targetLanguage"`
	Status         string          `json:"status"`
	Error          string          `json:"error"`
	OutputVideoKey string          `json:"outputVideoKey"`
	Result         json.RawMessage `json:"result"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	Links          ChildLinks      `json:"links"`
}

// ChildLinks are presigned GET URLs of a child's outputs (null until done;
// only the console fills them).
type ChildLinks struct {
	Output    *string        `json:"output"`
	Subtitles []SubtitleLink `json:"subtitles"`
	Burned    *string        `json:"burned"`
}

// Output is what a done task's result names: the video, the dub's audio,
// the subtitle files by language and the timing report.
type Output struct {
	OutputVideoKey string `json:"output_video_key"`
	DubAudioKey    string `json:"dub_audio_key"`
	// Subtitles and SubtitlesVTT map a language (or "bilingual") to its
	// SubRip and WebVTT file.
	Subtitles       map[string]string `json:"subtitles"`
	SubtitlesVTT    map[string]string `json:"subtitles_vtt"`
	TimingReportKey string            `json:"timing_report_key"`
	// BurnedVideoKey is the output with subtitles drawn in
	// (final.burned.mp4), when the task asked for it.
	BurnedVideoKey string `json:"burned_video_key"`
}

// OutputOf reads a result as mux_video records it (zero for none).
func OutputOf(result json.RawMessage) Output {
	var o Output
	if len(result) > 0 {
		_ = json.Unmarshal(result, &o)
	}
	return o
}

// NoSpeech reports whether the task ended with the "no speech" result.
func (t *Task) NoSpeech() bool {
	var r struct {
		NoSpeech bool `json:"no_speech"`
	}
	_ = json.Unmarshal(t.Result, &r)
	return r.NoSpeech
}

// StepsDone counts the steps that succeeded, and those the task's plan
// skipped (nothing is left to do of them).
func (t *Task) StepsDone() int {
	n := 0
	for _, s := range t.Steps {
		if s.Status == "succeeded" || s.Status == Skipped {
			n++
		}
	}
	return n
}

// CurrentStep names the first step that has not succeeded (a skipped
// step is never current).
func (t *Task) CurrentStep() string {
	for _, s := range t.Steps {
		if s.Status != "succeeded" && s.Status != Skipped {
			return s.Step
		}
	}
	return ""
}

// summaryColumns are the tasks columns scanSummary reads.
const summaryColumns = `id, status, source_language, target_language, speaker_id, error, created_at, updated_at,
	parent_task_id, targets, source_file_name, review,
	CASE WHEN status = 'review' THEN review_stage ELSE '' END, CASE WHEN status = 'review' THEN review_since END, project`

func scanSummary(row pgx.Row, extra ...any) (Summary, error) {
	var t Summary
	err := row.Scan(append([]any{&t.TaskID, &t.Status, &t.SourceLanguage, &t.TargetLanguage, &t.SpeakerID, &t.Error,
		&t.CreatedAt, &t.UpdatedAt, &t.ParentTaskID, &t.TargetLanguages, &t.FileName, &t.Review, &t.ReviewStage,
		&t.ReviewSince, &t.Project}, extra...)...)
	if t.TargetLanguages == nil {
		t.TargetLanguages = []string{}
	}
	if t.Review == nil {
		t.Review = []string{}
	}
	return t, err
}

// LoadSummary reads one task's summary.
func LoadSummary(ctx context.Context, q task.Querier, id uuid.UUID) (Summary, error) {
	t, err := scanSummary(q.QueryRow(ctx, `SELECT `+summaryColumns+` FROM tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("read task %s: %w", id, err)
	}
	return t, nil
}

// Load reads the task, its steps with their parts and attempts, its segment
// counts, dead letters and languages in one snapshot. Links and the timing
// report are left to the caller (the console presigns, ReadTimingReport
// reads the report).
func Load(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) (*Task, error) {
	t := &Task{Links: Links{Subtitles: []SubtitleLink{}}}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			t.Summary, err = scanSummary(tx.QueryRow(ctx, `SELECT `+summaryColumns+`,
				source_video_key, output_video_key, trace_id, result FROM tasks WHERE id = $1`, id),
				&t.SourceVideoKey, &t.OutputVideoKey, &t.TraceID, &t.Result)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("task %s: %w", id, ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("read task %s: %w", id, err)
			}
			if t.Plan, err = loadPlan(ctx, tx, id); err != nil {
				return err
			}
			if t.Steps, err = loadSteps(ctx, tx, id, t.IsParent(), t.Plan); err != nil {
				return err
			}
			t.Waiting = WaitOf(t.Steps)
			if err := tx.QueryRow(ctx, `SELECT count(*), count(mt_text), count(tts_audio_key),
				count(*) FILTER (WHERE tts_audio_key IS NULL AND tts_failures > 0)
				FROM segments WHERE task_id = $1`, id).Scan(&t.Segments.Total, &t.Segments.Translated,
				&t.Segments.Synthesized, &t.Segments.FailedTTS); err != nil {
				return fmt.Errorf("count segments of %s: %w", id, err)
			}
			if t.DeadLetters, err = deadLettersOfTask(ctx, tx, id); err != nil {
				return err
			}
			if t.Stream, err = loadStream(ctx, tx, id, t.Status); err != nil {
				return err
			}
			t.Languages, err = loadLanguages(ctx, tx, id)
			return err
		})
	if err != nil {
		return nil, err
	}
	if t.IsParent() {
		t.OutputVideoKey = "" // a parent's outputs are its children's
	}
	return t, nil
}

// stepsOf are the steps a task runs: a parent stops after asr, where its
// children take over.
func stepsOf(parent bool) []string {
	if parent {
		return []string{wire.StepExtractAudio, wire.StepASR}
	}
	return wire.Pipeline
}

// loadStream reads the task's stream (nil without one); a task that ended
// (done, failed, cancelled) shows its stream ended wherever it stopped.
func loadStream(ctx context.Context, q Querier, id uuid.UUID, status string) (*Stream, error) {
	sum, err := stream.Summarize(ctx, q, id)
	if err != nil || sum == nil {
		return nil, err
	}
	return &Stream{PlayableSeconds: float64(sum.PlayableMS) / 1000, Ended: sum.Ended || Ended(status),
		PlaylistKey: sum.Playlist}, nil
}
