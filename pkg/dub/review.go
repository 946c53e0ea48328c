package dub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/review"
	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file is the review of a task's lines before the voice is made: a
// task submitted with review stops in the status review after asr (stage
// transcript) or after translate (stage translation), and a person edits
// its lines — a line's source text, translation, times and speaker; a
// split at a word, a merge of two lines, a deletion; an import of a whole
// subtitle file — then approves them (Approve, approve.go). Each operation
// is one transaction that locks the task's row, checks it is in review,
// changes the segments and records the edit in review_edits (who, when,
// which line, the lines before and after), the history the task's
// timeline shows. These are the only writes of segments while a task is
// in review; nothing runs for the task then.
//
// Lines are numbered from 1 in timeline order, as review.Lines (and
// dubctl segments) number them. An edit of one line keeps the segments'
// numbering; a split, merge, deletion or import renumbers them from 0.
//
// A line's translation is made on approval for every line that has none:
// editing a line's source text clears its translation (unless the same
// edit gives a new one), and so do a split and a merge whose lines lack
// one, so that the edited lines are translated again when the person
// approves — not at once, since the translation engines run in the
// translate workers, not in the doors.

// ErrNotInReview is returned for an edit or approval of a task that is not
// waiting in review.
var ErrNotInReview = errors.New("the task is not in review (its lines are edited while it waits in review, before the voice is made)")

// ErrInvalidLine is returned for a line change refused: times out of
// order, past the video's end or overlapping a neighbour, a speaker too
// long, a split or merge that cannot be, an edit that changes nothing.
var ErrInvalidLine = errors.New("invalid line")

// ErrNoLines is returned by Approve for a task with no line left to dub.
var ErrNoLines = errors.New("no lines to dub")

// MaxSpeakerLength bounds a speaker's name, in characters.
const MaxSpeakerLength = 64

// Review actions (review_edits.action).
const (
	ActionEdit    = "edit"
	ActionSplit   = "split"
	ActionMerge   = "merge"
	ActionDelete  = "delete"
	ActionImport  = "import"
	ActionApprove = "approve"
)

// Change is an edit of one line: the fields given change, the others stay.
type Change struct {
	// Source is the line's new source text (not empty).
	Source *string `json:"source,omitempty"`
	// Text is its new translation; "" clears it, so that it is made on
	// approval.
	Text *string `json:"text,omitempty"`
	// StartMS and EndMS are its new times in the video.
	StartMS *int `json:"startMs,omitempty"`
	EndMS   *int `json:"endMs,omitempty"`
	// Speaker is who says it ("" for not known: the voices are told apart
	// when the speech is made).
	Speaker *string `json:"speaker,omitempty"`
}

// Edited is what a review edit did: the edit as recorded and the task's
// lines after it.
type Edited struct {
	TaskID uuid.UUID     `json:"taskId"`
	Edit   review.Edit   `json:"edit"`
	Lines  []review.Line `json:"lines"`
}

// line is one segment row as the review reads and writes it.
type line struct {
	idx                 int
	startMS, endMS      int
	source              string
	text                *string
	speaker, voice      string
	pitchHz, brightness float64
}

// row is l as its segment holds it.
func (l line) row() segment.Row {
	return segment.Row{StartMS: l.startMS, EndMS: l.endMS, Source: l.source, Text: l.text,
		Speaker: l.speaker, Voice: l.voice, PitchHz: l.pitchHz, BrightnessHz: l.brightness}
}

// shown is l as a person sees it, numbered n.
func (l line) shown(n int) review.Line {
	return review.Line{N: n, StartMS: l.startMS, EndMS: l.endMS, Speaker: l.speaker, Source: l.source, Text: l.text}
}

// session is one review operation inside its transaction: the task's row
// locked in review and its lines read.
type session struct {
	tx       pgx.Tx
	id       uuid.UUID
	stage    string
	since    *time.Time
	duration int // the video's length in ms, 0 when unknown
	lines    []line
}

// inReview runs fn on a session of task id in one transaction.
func inReview(ctx context.Context, db Beginner, id uuid.UUID, fn func(s *session) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		s, err := openSession(ctx, tx, id)
		if err != nil {
			return err
		}
		return fn(s)
	})
}

// openSession locks task id's row, checks that it waits in review and
// reads its lines.
func openSession(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*session, error) {
	s := &session{tx: tx, id: id}
	var status string
	err := tx.QueryRow(ctx, `SELECT status, review_stage, review_since,
		coalesce((source_probe->'info'->>'duration')::bigint / 1000000, 0)::int
		FROM tasks WHERE id = $1 FOR UPDATE`, id).Scan(&status, &s.stage, &s.since, &s.duration)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("task %s: %w", id, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("read task %s: %w", id, err)
	case status != task.Review:
		return nil, fmt.Errorf("review task %s: it is %s: %w", id, status, ErrNotInReview)
	}
	rows, err := tx.Query(ctx, `SELECT idx, start_ms, end_ms, src_text, mt_text, speaker, voice, pitch_hz, brightness_hz
		FROM segments WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		return nil, fmt.Errorf("read the lines of %s: %w", id, err)
	}
	s.lines, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (line, error) {
		var l line
		return l, r.Scan(&l.idx, &l.startMS, &l.endMS, &l.source, &l.text, &l.speaker, &l.voice, &l.pitchHz, &l.brightness)
	})
	if err != nil {
		return nil, fmt.Errorf("read the lines of %s: %w", id, err)
	}
	return s, nil
}

// at returns the index of line n (numbered from 1), or ErrNoSegment.
func (s *session) at(n int) (int, error) {
	if n < 1 || n > len(s.lines) {
		return 0, fmt.Errorf("line %d of task %s: %w (it has %d lines, numbered from 1)", n, s.id, ErrNoSegment, len(s.lines))
	}
	return n - 1, nil
}

// rewrite replaces the task's segments with s.lines, numbered from 0.
func (s *session) rewrite(ctx context.Context) error {
	rows := make([]segment.Row, len(s.lines))
	for i, l := range s.lines {
		s.lines[i].idx = i
		rows[i] = l.row()
	}
	if err := segment.Replaced(ctx, s.tx, s.id, rows); err != nil {
		return fmt.Errorf("rewrite the lines of %s: %w", s.id, err)
	}
	return nil
}

// record adds the edit to review_edits and returns it as recorded.
func (s *session) record(ctx context.Context, actor, action string, n *int, before, after []review.Line) (review.Edit, error) {
	e := review.Edit{Actor: actor, Action: action, Stage: s.stage, Line: n, Before: before, After: after}
	if e.Before == nil {
		e.Before = []review.Line{}
	}
	if e.After == nil {
		e.After = []review.Line{}
	}
	b, _ := json.Marshal(e.Before)
	a, _ := json.Marshal(e.After)
	var since *time.Time
	if action == ActionApprove {
		since = s.since
	}
	err := s.tx.QueryRow(ctx, `INSERT INTO review_edits (task_id, actor, action, stage, line, before, after, waited_since)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id, at`, s.id, actor, action, s.stage, n, b, a, since).Scan(&e.ID, &e.At)
	if err != nil {
		return e, fmt.Errorf("record the %s of %s: %w", action, s.id, err)
	}
	return e, nil
}

// edited is the answer of an edit: the edit and the lines after it.
func (s *session) edited(e review.Edit) *Edited {
	out := &Edited{TaskID: s.id, Edit: e, Lines: make([]review.Line, len(s.lines))}
	for i, l := range s.lines {
		out.Lines[i] = l.shown(i + 1)
	}
	return out
}

// cleanText trims a person's text and applies the text rule and the length
// bound; what names the field in the refusal.
func cleanText(what, text string) (string, error) {
	text = strings.TrimSpace(text)
	if err := CheckText(text); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrInvalidText, what, err)
	}
	if l := utf8.RuneCountInString(text); l > MaxTextLength {
		return "", fmt.Errorf("%w: %s: %d characters, at most %d", ErrInvalidText, what, l, MaxTextLength)
	}
	return text, nil
}
