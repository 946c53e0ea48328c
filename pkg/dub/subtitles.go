package dub

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/review"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A task's lines in review go out as a subtitle file and come back edited
// (Subtitle Edit, Aegisub): ExportLines writes them, ImportLines reads a
// file back through pkg/subtitle's reader, which refuses what a dub cannot
// be made from with the line it is on (the checks of a task's own subtitle
// file), and replaces the lines in one recorded edit.

// The texts of a line a subtitle file carries.
const (
	// TextSource is what is said.
	TextSource = "source"
	// TextTarget is its translation.
	TextTarget = "target"
)

// MaxLines bounds the lines an import brings.
const MaxLines = 10000

// ErrNoTranslation is returned by ExportLines for the translations of a
// task with a line that has none yet.
var ErrNoTranslation = errors.New("a line has no translation yet")

// ExportLines writes the lines of task id (in review or not) as a
// subtitle file of format f holding their text (TextSource or TextTarget;
// "" is the translation while the task waits in review of its
// translation, else the source), each with its speaker. A translation
// asked of a task with a line without one is ErrNoTranslation.
func ExportLines(ctx context.Context, db Querier, id uuid.UUID, f subtitle.Format, text string) ([]byte, error) {
	stage, lines, err := exportable(ctx, db, id)
	if err != nil {
		return nil, err
	}
	if text == "" {
		text = TextSource
		if stage == task.StageTranslation {
			text = TextTarget
		}
	}
	cues := make([]subtitle.Cue, len(lines))
	for i, l := range lines {
		cues[i] = subtitle.Cue{StartMS: l.startMS, EndMS: l.endMS, Text: l.source, Speaker: l.speaker}
		if text == TextTarget {
			if l.text == nil || *l.text == "" {
				return nil, fmt.Errorf("export the translation of task %s: line %d: %w (it is made on approval); export the source text",
					id, i+1, ErrNoTranslation)
			}
			cues[i].Text = *l.text
		}
	}
	var b bytes.Buffer
	if err := subtitle.Write(&b, f, cues); err != nil {
		return nil, fmt.Errorf("write the lines of %s: %w", id, err)
	}
	return b.Bytes(), nil
}

// ImportLines replaces the lines of task id, in review, with the cues of a
// subtitle file (SRT or WebVTT) for actor, recorded as one edit (action
// import, every line before and after). With TextSource the cues are the
// lines: their times, speakers and source texts; a line keeps its
// translation only where the file has as many cues as the task has lines
// and the cue's text is the line's source unchanged, and the others are
// translated on approval. With TextTarget the cues are the translations,
// line for line: the file must have one cue a line, and each line takes
// its cue's times, speaker and text, keeping its source. A file
// pkg/subtitle refuses is ErrInvalidLine naming the file's line.
func ImportLines(ctx context.Context, db Beginner, id uuid.UUID, actor, text string, file []byte) (*Edited, error) {
	if text != TextSource && text != TextTarget {
		return nil, fmt.Errorf("%w: text %q: want source or target", ErrInvalidLine, text)
	}
	var out *Edited
	err := inReview(ctx, db, id, func(s *session) error {
		cues, err := subtitle.Parse(file, subtitle.Limits{DurationMS: s.duration, MaxCues: MaxLines})
		if err != nil {
			return fmt.Errorf("%w: subtitles: %v", ErrInvalidLine, err)
		}
		before := make([]review.Line, len(s.lines))
		for i, l := range s.lines {
			before[i] = l.shown(i + 1)
		}
		if s.lines, err = s.imported(cues, text); err != nil {
			return err
		}
		if err := s.rewrite(ctx); err != nil {
			return err
		}
		after := make([]review.Line, len(s.lines))
		for i, l := range s.lines {
			after[i] = l.shown(i + 1)
		}
		e, err := s.record(ctx, actor, ActionImport, nil, before, after)
		out = s.edited(e)
		return err
	})
	return out, err
}

// imported are the session's lines once cues of text are taken in.
func (s *session) imported(cues []subtitle.Cue, text string) ([]line, error) {
	same := len(cues) == len(s.lines)
	if text == TextTarget && !same {
		return nil, fmt.Errorf("%w: the file has %d cues and the task %d lines: translations are imported line for line "+
			"(split, merge or delete lines first, or import the source text)", ErrInvalidLine, len(cues), len(s.lines))
	}
	out := make([]line, len(cues))
	for i, c := range cues {
		if err := checkCue(i+1, c); err != nil {
			return nil, err
		}
		l := line{startMS: c.StartMS, endMS: c.EndMS, source: c.Text, speaker: c.Speaker}
		if same {
			old := s.lines[i]
			l.pitchHz, l.brightness = old.pitchHz, old.brightness
			if old.speaker == c.Speaker {
				l.voice = old.voice
			}
			if text == TextSource && old.source == c.Text {
				l.text = old.text
			}
		}
		if text == TextTarget {
			l.source, l.text = s.lines[i].source, &cues[i].Text
		}
		out[i] = l
	}
	return out, nil
}

// checkCue applies a line's rules to cue n: its text's length, its speaker.
func checkCue(n int, c subtitle.Cue) error {
	if _, err := cleanText(fmt.Sprintf("cue %d", n), c.Text); err != nil {
		return err
	}
	if _, err := cleanSpeaker(c.Speaker); err != nil {
		return fmt.Errorf("cue %d: %w", n, err)
	}
	return nil
}

// exportable reads task id's review stage ("" unless it waits in review)
// and its lines in timeline order. A task that does not exist is
// ErrNotFound.
func exportable(ctx context.Context, db Querier, id uuid.UUID) (string, []line, error) {
	var status, stage string
	err := db.QueryRow(ctx, `SELECT status, review_stage FROM tasks WHERE id = $1`, id).Scan(&status, &stage)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil, fmt.Errorf("task %s: %w", id, ErrNotFound)
	case err != nil:
		return "", nil, fmt.Errorf("read task %s: %w", id, err)
	}
	if status != task.Review {
		stage = ""
	}
	rows, err := db.Query(ctx, `SELECT start_ms, end_ms, speaker, src_text, mt_text
		FROM segments WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		return "", nil, fmt.Errorf("read the lines of %s: %w", id, err)
	}
	lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (line, error) {
		var l line
		return l, r.Scan(&l.startMS, &l.endMS, &l.speaker, &l.source, &l.text)
	})
	if err != nil {
		return "", nil, fmt.Errorf("read the lines of %s: %w", id, err)
	}
	return stage, lines, nil
}
