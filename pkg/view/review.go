package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/review"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TaskReview is a task's lines as a person reviews them before the voice is
// made: GET /api/tasks/{id}/review and `dubctl review show`. Any task's
// lines can be read this way; only a task in review (Status "review")
// takes edits (pkg/dub).
type TaskReview struct {
	TaskID uuid.UUID `json:"taskId"`
	Status string    `json:"status"`
	// Asked are the stages the submission asked to review (transcript,
	// translation), in the order the task reaches them.
	Asked []string `json:"review"`
	// Stage is the stage the task waits in ("" when it is not in review):
	// transcript (after asr: the source text, timing and speakers are
	// edited, the translation is made on approval) or translation (after
	// translate: the translation too).
	Stage string `json:"stage"`
	// Since is when the task began to wait in review, WaitedSeconds how
	// long it has waited (both null when it is not in review).
	Since         *time.Time `json:"since"`
	WaitedSeconds *float64   `json:"waitedSeconds"`
	// SourceLanguage and TargetLanguage are the task's.
	SourceLanguage string `json:"sourceLanguage"`
	TargetLanguage string `json:"targetLanguage"`
	// DurationMS is the video's length, the bound of a line's end (0 when
	// unknown).
	DurationMS int          `json:"durationMs"`
	Lines      []ReviewLine `json:"lines"`
	// Edits are every edit and approval made, oldest first.
	Edits []ReviewEdit `json:"edits"`
}

// ReviewLine is one line under review (pkg/review: the shape the writer,
// pkg/dub, shares with this read model).
type ReviewLine = review.Line

// ReviewEdit is one change a person made to a task's lines in review, or
// an approval (review.Edit).
type ReviewEdit = review.Edit

// ReviewOf reads task taskID's review: its status, stage, lines and edits.
// A task that does not exist is ErrNotFound.
func ReviewOf(ctx context.Context, db Querier, taskID uuid.UUID) (*TaskReview, error) {
	r := &TaskReview{TaskID: taskID}
	var since *time.Time
	var waited *float64
	err := db.QueryRow(ctx, `SELECT status, review, review_stage, review_since,
		extract(epoch FROM now() - review_since)::float8, source_language, target_language,
		coalesce((source_probe->'info'->>'duration')::bigint / 1000000, 0)::int
		FROM tasks WHERE id = $1`, taskID).Scan(&r.Status, &r.Asked, &r.Stage, &since, &waited,
		&r.SourceLanguage, &r.TargetLanguage, &r.DurationMS)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("task %s: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read the review of %s: %w", taskID, err)
	}
	if r.Status == Review {
		r.Since, r.WaitedSeconds = since, waited
	} else {
		r.Stage = ""
	}
	if r.Lines, err = ReviewLines(ctx, db, taskID); err != nil {
		return nil, err
	}
	if r.Edits, err = ReviewEdits(ctx, db, taskID); err != nil {
		return nil, err
	}
	return r, nil
}

// ReviewLines reads the task's lines in order, numbered from 1.
func ReviewLines(ctx context.Context, db Querier, taskID uuid.UUID) ([]ReviewLine, error) {
	rows, err := db.Query(ctx, `SELECT start_ms, end_ms, speaker, src_text, mt_text
		FROM segments WHERE task_id = $1 ORDER BY idx`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read the lines of %s: %w", taskID, err)
	}
	n := 0
	lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewLine, error) {
		n++
		l := ReviewLine{N: n}
		return l, r.Scan(&l.StartMS, &l.EndMS, &l.Speaker, &l.Source, &l.Text)
	})
	if err != nil {
		return nil, fmt.Errorf("read the lines of %s: %w", taskID, err)
	}
	if lines == nil {
		lines = []ReviewLine{}
	}
	return lines, nil
}

// ReviewEdits reads the task's review edits, oldest first.
func ReviewEdits(ctx context.Context, db Querier, taskID uuid.UUID) ([]ReviewEdit, error) {
	rows, err := db.Query(ctx, `SELECT id, at, actor, action, stage, line, before, after
		FROM review_edits WHERE task_id = $1 ORDER BY id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read the review edits of %s: %w", taskID, err)
	}
	edits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewEdit, error) {
		var e ReviewEdit
		var before, after []byte
		if err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Stage, &e.Line, &before, &after); err != nil {
			return e, err
		}
		if err := json.Unmarshal(before, &e.Before); err != nil {
			return e, fmt.Errorf("edit %d: %w", e.ID, err)
		}
		return e, json.Unmarshal(after, &e.After)
	})
	if err != nil {
		return nil, fmt.Errorf("read the review edits of %s: %w", taskID, err)
	}
	if edits == nil {
		edits = []ReviewEdit{}
	}
	return edits, nil
}

// editDetail is the timeline's text of a review edit (EditText) from its
// lines as recorded (raw: {"before": [...], "after": [...]}).
func editDetail(action, line, raw string) string {
	e := ReviewEdit{Action: action}
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return raw
	}
	if n, err := strconv.Atoi(line); err == nil {
		e.Line = &n
	}
	return EditText(e)
}

// EditText says what a review edit did, in words — `line 2: "good
// morning" → "good evening"` — as the timeline and dubctl show it.
func EditText(e ReviewEdit) string {
	texts := func(ls []ReviewLine) string {
		var out []string
		for _, l := range ls {
			out = append(out, lineText(l))
		}
		return strings.Join(out, " | ")
	}
	line := ""
	if e.Line != nil {
		line = strconv.Itoa(*e.Line)
	}
	switch e.Action {
	case "import":
		return fmt.Sprintf("%d lines → %d lines", len(e.Before), len(e.After))
	case "approve":
		return "approved the " + e.Stage
	case "delete":
		return fmt.Sprintf("line %s deleted: %s", line, texts(e.Before))
	case "merge":
		return fmt.Sprintf("lines %s and the next merged: %s → %s", line, texts(e.Before), texts(e.After))
	case "split":
		return fmt.Sprintf("line %s split: %s → %s", line, texts(e.Before), texts(e.After))
	}
	return fmt.Sprintf("line %s: %s → %s", line, texts(e.Before), texts(e.After))
}

// lineText is a line in a timeline's words: its times, speaker, source and
// translation.
func lineText(l ReviewLine) string {
	s := fmt.Sprintf("%s–%s", seconds(l.StartMS), seconds(l.EndMS))
	if l.Speaker != "" {
		s += " " + l.Speaker + ":"
	}
	s += fmt.Sprintf(" %q", l.Source)
	if l.Text != nil {
		s += fmt.Sprintf(" (%q)", *l.Text)
	}
	return s
}

// seconds writes milliseconds as seconds with three decimals.
func seconds(ms int) string { return fmt.Sprintf("%d.%03ds", ms/1000, ms%1000) }

// ReviewWaits are the tasks waiting in review: how many, and the longest
// waiting first (at most the limit asked). They are never stuck and
// never alerted: the health page shows them beside the work, not among
// its reasons.
type ReviewWaits struct {
	Count int          `json:"count"`
	Tasks []ReviewWait `json:"tasks"`
}

// ReviewWait is one task waiting in review.
type ReviewWait struct {
	TaskID        uuid.UUID `json:"taskId"`
	Stage         string    `json:"stage"`
	Since         time.Time `json:"since"`
	WaitedSeconds float64   `json:"waitedSeconds"`
	FileName      string    `json:"fileName"`
}

// InReview reads the tasks waiting in review, the longest waiting first,
// at most limit of them.
func InReview(ctx context.Context, db Querier, limit int) (ReviewWaits, error) {
	w := ReviewWaits{Tasks: []ReviewWait{}}
	rows, err := db.Query(ctx, `SELECT id, review_stage, coalesce(review_since, updated_at),
		extract(epoch FROM now() - coalesce(review_since, updated_at))::float8, source_file_name, count(*) OVER ()
		FROM tasks WHERE status = 'review' ORDER BY coalesce(review_since, updated_at), id LIMIT $1`, limit)
	if err != nil {
		return w, fmt.Errorf("read the tasks in review: %w", err)
	}
	w.Tasks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewWait, error) {
		var t ReviewWait
		return t, r.Scan(&t.TaskID, &t.Stage, &t.Since, &t.WaitedSeconds, &t.FileName, &w.Count)
	})
	if err != nil {
		return w, fmt.Errorf("read the tasks in review: %w", err)
	}
	if w.Tasks == nil {
		w.Tasks = []ReviewWait{}
	}
	return w, nil
}
