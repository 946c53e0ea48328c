package dub

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/review"
	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/google/uuid"
)

// EditLine changes line n (numbered from 1) of task id, in review, as
// change says, and records the edit by actor. A new source text clears the
// line's translation unless change gives one too (the line is translated
// again on approval); a new speaker clears its voice (one is chosen when
// the speech is made). New times must keep 0 ≤ start < end, within the
// video and clear of the lines before and after. A task not in review is
// ErrNotInReview, a missing line ErrNoSegment, a text the text rule
// refuses ErrInvalidText, other refusals ErrInvalidLine.
func EditLine(ctx context.Context, db Beginner, id uuid.UUID, actor string, n int, change Change) (*Edited, error) {
	var out *Edited
	err := inReview(ctx, db, id, func(s *session) error {
		i, err := s.at(n)
		if err != nil {
			return err
		}
		l, err := s.changed(i, change)
		if err != nil {
			return err
		}
		before := s.lines[i].shown(n)
		if err := segment.Edited(ctx, s.tx, id, l.idx, l.row()); err != nil {
			return fmt.Errorf("change line %d of %s: %w", n, id, err)
		}
		s.lines[i] = l
		e, err := s.record(ctx, actor, ActionEdit, &n, []review.Line{before}, []review.Line{l.shown(n)})
		out = s.edited(e)
		return err
	})
	return out, err
}

// changed returns line i with change applied and checked.
func (s *session) changed(i int, c Change) (line, error) {
	l := s.lines[i]
	if c == (Change{}) {
		return l, fmt.Errorf("%w: nothing to change: give source, text, startMs, endMs or speaker", ErrInvalidLine)
	}
	if c.Source != nil {
		src, err := cleanText("source", *c.Source)
		if err != nil {
			return l, err
		}
		if src == "" {
			return l, fmt.Errorf("%w: source: the text is empty; delete the line instead", ErrInvalidText)
		}
		if src != l.source && c.Text == nil {
			l.text = nil // translated again on approval
		}
		l.source = src
	}
	if c.Text != nil {
		text, err := cleanText("text", *c.Text)
		if err != nil {
			return l, err
		}
		l.text = &text
		if text == "" {
			l.text = nil
		}
	}
	if c.Speaker != nil {
		sp, err := cleanSpeaker(*c.Speaker)
		if err != nil {
			return l, err
		}
		if sp != l.speaker {
			l.speaker, l.voice = sp, ""
		}
	}
	if c.StartMS != nil || c.EndMS != nil {
		l.startMS, l.endMS = pick(c.StartMS, l.startMS), pick(c.EndMS, l.endMS)
		if err := s.checkTimes(i, l); err != nil {
			return l, err
		}
	}
	return l, nil
}

// checkTimes checks the times of l, put in place of line i: 0 ≤ start <
// end, not past the video's end, clear of the lines around it.
func (s *session) checkTimes(i int, l line) error {
	n := i + 1
	switch {
	case l.startMS < 0 || l.endMS <= l.startMS:
		return fmt.Errorf("%w: line %d: start %d ms and end %d ms: want 0 ≤ start < end", ErrInvalidLine, n, l.startMS, l.endMS)
	case s.duration > 0 && l.endMS > s.duration:
		return fmt.Errorf("%w: line %d: end %d ms is past the video's end (%d ms)", ErrInvalidLine, n, l.endMS, s.duration)
	case i > 0 && l.startMS < s.lines[i-1].endMS:
		return fmt.Errorf("%w: line %d: start %d ms overlaps line %d, which ends at %d ms", ErrInvalidLine, n, l.startMS, n-1, s.lines[i-1].endMS)
	case i+1 < len(s.lines) && l.endMS > s.lines[i+1].startMS:
		return fmt.Errorf("%w: line %d: end %d ms overlaps line %d, which starts at %d ms", ErrInvalidLine, n, l.endMS, n+1, s.lines[i+1].startMS)
	}
	return nil
}

// cleanSpeaker trims a speaker's name and checks it: the text rule, at most
// MaxSpeakerLength characters.
func cleanSpeaker(name string) (string, error) {
	name = strings.TrimSpace(name)
	if err := CheckText(name); err != nil {
		return "", fmt.Errorf("%w: speaker: %v", ErrInvalidText, err)
	}
	if l := utf8.RuneCountInString(name); l > MaxSpeakerLength {
		return "", fmt.Errorf("%w: speaker: %d characters, at most %d", ErrInvalidLine, l, MaxSpeakerLength)
	}
	return name, nil
}

// pick returns *v, or def when v is nil.
func pick(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

// SplitLine splits line n (numbered from 1) of task id, in review, into
// two before its word-th word (numbered from 1, 2 up to its number of
// words): the first line keeps the words before it, the second starts with
// it, and the line's time is shared between them in proportion to their
// text. Both keep the speaker and have no translation (they are translated
// on approval). The lines after are numbered one higher.
func SplitLine(ctx context.Context, db Beginner, id uuid.UUID, actor string, n, word int) (*Edited, error) {
	var out *Edited
	err := inReview(ctx, db, id, func(s *session) error {
		i, err := s.at(n)
		if err != nil {
			return err
		}
		l := s.lines[i]
		words := strings.Fields(l.source)
		if word < 2 || word > len(words) {
			return fmt.Errorf("%w: split line %d before word %d: it has %d words; split before word 2 to %d",
				ErrInvalidLine, n, word, len(words), len(words))
		}
		if l.endMS-l.startMS < 2 {
			return fmt.Errorf("%w: line %d lasts %d ms, too short to split", ErrInvalidLine, n, l.endMS-l.startMS)
		}
		first, second := l, l
		first.source, second.source = strings.Join(words[:word-1], " "), strings.Join(words[word-1:], " ")
		first.text, second.text = nil, nil
		cut := l.startMS + (l.endMS-l.startMS)*utf8.RuneCountInString(first.source)/utf8.RuneCountInString(l.source)
		first.endMS, second.startMS = max(cut, l.startMS+1), max(cut, l.startMS+1)
		s.lines = append(s.lines[:i], append([]line{first, second}, s.lines[i+1:]...)...)
		if err := s.rewrite(ctx); err != nil {
			return err
		}
		e, err := s.record(ctx, actor, ActionSplit, &n, []review.Line{l.shown(n)},
			[]review.Line{first.shown(n), second.shown(n + 1)})
		out = s.edited(e)
		return err
	})
	return out, err
}

// MergeLines joins line n (numbered from 1) of task id, in review, and the
// line after it into one: from the first's start to the second's end, the
// texts joined with a space, the first's speaker; the translations joined
// when both have one, else none (made on approval). The lines after are
// numbered one lower.
func MergeLines(ctx context.Context, db Beginner, id uuid.UUID, actor string, n int) (*Edited, error) {
	var out *Edited
	err := inReview(ctx, db, id, func(s *session) error {
		i, err := s.at(n)
		if err != nil {
			return err
		}
		if i+1 == len(s.lines) {
			return fmt.Errorf("%w: line %d is the last one; a merge joins a line with the next", ErrInvalidLine, n)
		}
		a, b := s.lines[i], s.lines[i+1]
		m := a
		m.endMS, m.source, m.text = b.endMS, a.source+" "+b.source, nil
		if a.text != nil && b.text != nil {
			joined := strings.TrimSpace(*a.text + " " + *b.text)
			m.text = &joined
		}
		if l := utf8.RuneCountInString(m.source); l > MaxTextLength {
			return fmt.Errorf("%w: the merged line would have %d characters, at most %d", ErrInvalidLine, l, MaxTextLength)
		}
		s.lines = append(s.lines[:i], append([]line{m}, s.lines[i+2:]...)...)
		if err := s.rewrite(ctx); err != nil {
			return err
		}
		e, err := s.record(ctx, actor, ActionMerge, &n, []review.Line{a.shown(n), b.shown(n + 1)},
			[]review.Line{m.shown(n)})
		out = s.edited(e)
		return err
	})
	return out, err
}

// DeleteLine removes line n (numbered from 1) of task id, in review: it is
// not dubbed. The lines after are numbered one lower.
func DeleteLine(ctx context.Context, db Beginner, id uuid.UUID, actor string, n int) (*Edited, error) {
	var out *Edited
	err := inReview(ctx, db, id, func(s *session) error {
		i, err := s.at(n)
		if err != nil {
			return err
		}
		gone := s.lines[i]
		s.lines = append(s.lines[:i], s.lines[i+1:]...)
		if err := s.rewrite(ctx); err != nil {
			return err
		}
		e, err := s.record(ctx, actor, ActionDelete, &n, []review.Line{gone.shown(n)}, nil)
		out = s.edited(e)
		return err
	})
	return out, err
}

// LineEdit is one edit of a line as every door takes it (the console's
// POST /api/tasks/{id}/review/edit, dubctl review edit): an action on line
// Line (numbered from 1) — ActionEdit (the default) with its Change,
// ActionSplit before Word, ActionMerge with the next line, ActionDelete.
type LineEdit struct {
	Line   int    `json:"line"`
	Action string `json:"action,omitempty"`
	Change
	// Word is where a split starts the second line (numbered from 1).
	Word int `json:"word,omitempty"`
}

// EditReview applies e to task id, in review, for actor: EditLine,
// SplitLine, MergeLines or DeleteLine. A change given with another action
// than edit, a word with another than split, and an unknown action are
// ErrInvalidLine.
func EditReview(ctx context.Context, db Beginner, id uuid.UUID, actor string, e LineEdit) (*Edited, error) {
	if e.Action == "" {
		e.Action = ActionEdit
	}
	if e.Action != ActionEdit && e.Change != (Change{}) {
		return nil, fmt.Errorf("%w: %s takes no source, text, startMs, endMs or speaker (an edit does)", ErrInvalidLine, e.Action)
	}
	if e.Action != ActionSplit && e.Word != 0 {
		return nil, fmt.Errorf("%w: %s takes no word (a split does)", ErrInvalidLine, e.Action)
	}
	switch e.Action {
	case ActionEdit:
		return EditLine(ctx, db, id, actor, e.Line, e.Change)
	case ActionSplit:
		return SplitLine(ctx, db, id, actor, e.Line, e.Word)
	case ActionMerge:
		return MergeLines(ctx, db, id, actor, e.Line)
	case ActionDelete:
		return DeleteLine(ctx, db, id, actor, e.Line)
	}
	return nil, fmt.Errorf("%w: action %q: want edit, split, merge or delete", ErrInvalidLine, e.Action)
}
