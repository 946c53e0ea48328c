package follow

import (
	"fmt"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/schollz/progressbar/v3"
)

// progressOf describes how far the task got: its status, steps and
// segments, and the units of work done of all (the parts of its steps; a
// step not fanned out yet counts as one).
func progressOf(t *view.Task) (desc string, done, total int) {
	for _, s := range t.Steps {
		if s.Status == view.Skipped {
			continue // no work: the task's plan leaves it out
		}
		parts := max(1, len(s.Parts))
		total += parts
		switch {
		case s.Status == "succeeded":
			done += parts
		default:
			for _, p := range s.Parts {
				if p.Status == "succeeded" {
					done++
				}
			}
		}
	}
	status := t.Status
	if cur := t.CurrentStep(); cur != "" && t.Status == view.Running {
		status = cur
	}
	desc = fmt.Sprintf("%-13s steps %d/%d", status, t.StepsDone(), len(t.Steps))
	if t.Segments.Total > 0 {
		desc += fmt.Sprintf(", segments %d/%d translated, %d/%d synthesized", t.Segments.Translated,
			t.Segments.Total, t.Segments.Synthesized, t.Segments.Total)
	}
	if t.Waiting != nil {
		desc += ", " + t.Waiting.Message
	}
	return desc, done, total
}

// progressLine shows the progress of a task: a progress bar redrawn in
// place on a terminal (schollz/progressbar), one line per change
// otherwise; a zero value (--json) shows nothing.
type progressLine struct {
	w    io.Writer
	bar  *progressbar.ProgressBar // nil: not a terminal
	last string
}

// newProgressLine shows progress on w, as a bar when w is a terminal.
func newProgressLine(w io.Writer, terminal bool) progressLine {
	p := progressLine{w: w}
	if terminal {
		// The bar draws with control characters of its own: it writes
		// past the escaper, and what it shows of the task is escaped
		// before (show).
		w := cli.RawWriter(w)
		p.bar = progressbar.NewOptions(1,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(20),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetDescription("queued"),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return p
}

// show draws the task's progress t when it changed.
func (p *progressLine) show(t *view.Task) {
	if p.w == nil {
		return
	}
	desc, done, total := progressOf(t)
	desc = cli.Cell(desc)
	text := fmt.Sprintf("%s, %d/%d units done", desc, done, total)
	if text == p.last {
		return
	}
	p.last = text
	if p.bar == nil {
		fmt.Fprintf(p.w, "%s %s\n", time.Now().Format(time.TimeOnly), text)
		return
	}
	if p.bar.GetMax() != total {
		p.bar.ChangeMax(total)
	}
	p.bar.Describe(desc)
	_ = p.bar.Set(done)
}

// note prints a line of its own above the bar (or after the last line).
func (p *progressLine) note(text string) {
	if p.w == nil {
		return
	}
	if p.bar != nil {
		_ = p.bar.Clear()
		fmt.Fprintf(cli.RawWriter(p.w), "\r%s\n", cli.Cell(text))
		return
	}
	fmt.Fprintf(p.w, "%s %s\n", time.Now().Format(time.TimeOnly), text)
}

// end ends the bar, once.
func (p *progressLine) end() {
	if p.bar != nil && !p.bar.IsFinished() {
		_ = p.bar.Exit() // the final newline, through OnCompletion
	}
	p.w, p.bar = nil, nil
}
