package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// maxTimingReportBytes bounds the timing report read into a task's detail.
const maxTimingReportBytes = 8 << 20

// attempt is one row of task_steps.
type attempt struct {
	Step       string     `json:"-"`
	Part       string     `json:"-"`
	Attempt    int        `json:"attempt"`
	Status     string     `json:"status"`
	Worker     string     `json:"worker"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	DurationMS *int64     `json:"durationMs"`
	Error      string     `json:"error"`
}

// partView is one part of a step with its attempts, oldest first.
type partView struct {
	Part     string    `json:"part"`
	Status   string    `json:"status"`
	Attempts []attempt `json:"attempts"`
}

// stepView is one pipeline step over its parts.
type stepView struct {
	Step       string     `json:"step"`
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	DurationMS *int64     `json:"durationMs"`
	Parts      []partView `json:"parts"`
}

// segmentCounts counts a task's segments by progress.
type segmentCounts struct {
	Total       int `json:"total"`
	Translated  int `json:"translated"`
	Synthesized int `json:"synthesized"`
	FailedTTS   int `json:"failedTts"`
}

// taskDetail is GET /api/tasks/{id}.
type taskDetail struct {
	taskSummary
	SourceVideoKey string           `json:"sourceVideoKey"`
	OutputVideoKey string           `json:"outputVideoKey"`
	TraceID        string           `json:"traceId"`
	Result         json.RawMessage  `json:"result"`
	Steps          []stepView       `json:"steps"`
	Segments       segmentCounts    `json:"segments"`
	TimingReport   json.RawMessage  `json:"timingReport"`
	Links          links            `json:"links"`
	DeadLetters    []deadLetterView `json:"deadLetters"`
	Languages      *languagesView   `json:"languages"`
	attempts       []attempt        // every attempt, for realtime-status
	succeeded      map[string]bool  // step → all parts succeeded
	registered     map[string][]string
}

// loadDetail reads the task, its steps and parts with their attempts, its
// segment counts and dead letters in one snapshot.
func (s *server) loadDetail(ctx context.Context, id uuid.UUID) (*taskDetail, error) {
	d := &taskDetail{succeeded: map[string]bool{}, registered: map[string][]string{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			if d.taskSummary, err = s.loadSummary(ctx, tx, id); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT source_video_key, output_video_key, trace_id, result FROM tasks
				WHERE id = $1`, id).Scan(&d.SourceVideoKey, &d.OutputVideoKey, &d.TraceID, &d.Result); err != nil {
				return fmt.Errorf("read task %s: %w", id, err)
			}
			if err := d.loadAttempts(ctx, tx); err != nil {
				return err
			}
			if err := d.loadStepState(ctx, tx); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT count(*), count(mt_text), count(tts_audio_key),
				count(*) FILTER (WHERE tts_audio_key IS NULL AND tts_failures > 0)
				FROM segments WHERE task_id = $1`, id).Scan(&d.Segments.Total, &d.Segments.Translated,
				&d.Segments.Synthesized, &d.Segments.FailedTTS); err != nil {
				return fmt.Errorf("count segments of %s: %w", id, err)
			}
			if d.DeadLetters, err = deadLettersOfTask(ctx, tx, id); err != nil {
				return err
			}
			d.Languages, err = loadLanguages(ctx, tx, id)
			return err
		})
	if err != nil {
		return nil, err
	}
	d.Steps = d.buildSteps()
	return d, nil
}

func (d *taskDetail) loadAttempts(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT step, part, attempt, status, worker, started_at, finished_at, error
		FROM task_steps WHERE task_id = $1 ORDER BY started_at, id`, d.TaskID)
	if err != nil {
		return fmt.Errorf("read steps of %s: %w", d.TaskID, err)
	}
	d.attempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (attempt, error) {
		var a attempt
		err := r.Scan(&a.Step, &a.Part, &a.Attempt, &a.Status, &a.Worker, &a.StartedAt, &a.FinishedAt, &a.Error)
		if a.FinishedAt != nil {
			ms := a.FinishedAt.Sub(a.StartedAt).Milliseconds()
			a.DurationMS = &ms
		}
		return a, err
	})
	if err != nil {
		return fmt.Errorf("read steps of %s: %w", d.TaskID, err)
	}
	return nil
}

// loadStepState reads which steps succeeded (step_succeeded, the runtime's
// own definition) and the parts each step was fanned out into.
func (d *taskDetail) loadStepState(ctx context.Context, tx pgx.Tx) error {
	for _, name := range wire.Pipeline {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT step_succeeded($1, $2)`, d.TaskID, name).Scan(&ok); err != nil {
			return fmt.Errorf("read step %s of %s: %w", name, d.TaskID, err)
		}
		d.succeeded[name] = ok
	}
	rows, err := tx.Query(ctx, `SELECT step, part FROM step_parts WHERE task_id = $1 ORDER BY created_at, part`, d.TaskID)
	if err != nil {
		return fmt.Errorf("read parts of %s: %w", d.TaskID, err)
	}
	var stepName, part string
	_, err = pgx.ForEachRow(rows, []any{&stepName, &part}, func() error {
		d.registered[stepName] = append(d.registered[stepName], part)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read parts of %s: %w", d.TaskID, err)
	}
	return nil
}

// buildSteps groups the attempts by step and part.
func (d *taskDetail) buildSteps() []stepView {
	out := make([]stepView, 0, len(wire.Pipeline))
	for _, name := range wire.Pipeline {
		sv := stepView{Step: name, Parts: []partView{}}
		byPart := map[string]*partView{}
		for _, p := range d.registered[name] {
			byPart[p] = &partView{Part: p, Status: "pending", Attempts: []attempt{}}
		}
		for _, a := range d.attempts {
			if a.Step != name {
				continue
			}
			pv := byPart[a.Part]
			if pv == nil {
				pv = &partView{Part: a.Part, Attempts: []attempt{}}
				byPart[a.Part] = pv
			}
			pv.Attempts = append(pv.Attempts, a)
			sv.Attempts++
			sv.StartedAt = earliest(sv.StartedAt, &a.StartedAt)
			sv.FinishedAt = latest(sv.FinishedAt, a.FinishedAt)
		}
		for _, pv := range byPart {
			pv.Status = partStatus(pv.Attempts)
			sv.Parts = append(sv.Parts, *pv)
		}
		sort.Slice(sv.Parts, func(i, j int) bool { return sv.Parts[i].Part < sv.Parts[j].Part })
		sv.Status = stepStatus(d.succeeded[name], sv.Parts)
		if sv.Status != "succeeded" {
			sv.FinishedAt = nil
		}
		if sv.StartedAt != nil && sv.FinishedAt != nil {
			ms := sv.FinishedAt.Sub(*sv.StartedAt).Milliseconds()
			sv.DurationMS = &ms
		}
		out = append(out, sv)
	}
	return out
}

// partStatus is succeeded when an attempt succeeded, else the status of the
// latest attempt, pending without one.
func partStatus(as []attempt) string {
	for _, a := range as {
		if a.Status == "succeeded" {
			return "succeeded"
		}
	}
	if len(as) == 0 {
		return "pending"
	}
	return as[len(as)-1].Status
}

// stepStatus sums up a step's parts: succeeded (every part has, by
// step_succeeded), running, parked, failed, or pending (no attempt yet).
func stepStatus(succeeded bool, parts []partView) string {
	if succeeded {
		return "succeeded"
	}
	seen := map[string]bool{}
	for _, p := range parts {
		seen[p.Status] = true
	}
	for _, st := range []string{"running", "parked", "failed"} {
		if seen[st] {
			return st
		}
	}
	if seen["succeeded"] {
		return "running" // some parts done, others not started
	}
	return "pending"
}

func earliest(a, b *time.Time) *time.Time {
	if b == nil || (a != nil && a.Before(*b)) {
		return a
	}
	t := *b
	return &t
}

func latest(a, b *time.Time) *time.Time {
	if b == nil || (a != nil && a.After(*b)) {
		return a
	}
	t := *b
	return &t
}

// requestedDetail loads the detail of the task named by the {id} path
// value; it answers the error itself and returns false on failure.
func (s *server) requestedDetail(w http.ResponseWriter, r *http.Request) (*taskDetail, bool) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	d, err := s.loadDetail(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return d, true
}

// getTask answers the task's detail with presigned links.
func (s *server) getTask(w http.ResponseWriter, r *http.Request) {
	d, ok := s.requestedDetail(w, r)
	if !ok {
		return
	}
	d.Links, d.TimingReport = s.links(r.Context(), d)
	s.childLinksOf(r.Context(), d.Languages)
	writeJSON(w, http.StatusOK, d)
}
