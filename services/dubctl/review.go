package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// reviewCmd builds `dubctl review`: a task's lines before the voice is
// made, for a task submitted with --review.
func reviewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "review show|edit|approve|export|import TASK_ID",
		Short: "Read, edit and approve the lines of a task waiting in review",
		Long: `A task submitted with --review transcript (and/or translation) stops in the
status review after asr (or after translate) and waits for a person: its lines
can be read (show), changed (edit: a line's source text, translation, times and
speaker; a split before a word, a merge with the next line, a deletion),
exported as SRT or WebVTT and imported back (export, import), and approved
(approve), which lets the chain go on with the edits. A line whose source text
changed, and every line split or merged, is translated again on approval.
Every edit is kept (who, when, before and after) in the task's timeline and
the audit log.`,
		Args: exactArgs(0),
	}
	cmd.AddCommand(reviewShowCmd(), reviewEditCmd(), reviewApproveCmd(), reviewExportCmd(), reviewImportCmd())
	return cmd
}

// reviewShowCmd builds `dubctl review show`.
func reviewShowCmd() *cobra.Command {
	return showCmd(&cobra.Command{
		Use:   "show TASK_ID [--json]",
		Short: "List a task's lines in review: times, speaker, source text, translation",
	}, "print the review as JSON (GET /api/tasks/{id}/review)", parseTaskID,
		func(ctx context.Context, b backend, id uuid.UUID) (*view.TaskReview, error) {
			return b.Review(ctx, id)
		}, printReview)
}

// printReview writes the review's state and its lines as a table.
func printReview(w io.Writer, r *view.TaskReview) error {
	state := r.Status
	if r.Stage != "" && r.WaitedSeconds != nil {
		state = fmt.Sprintf("review of the %s, waiting for %s", r.Stage,
			(time.Duration(*r.WaitedSeconds) * time.Second).Round(time.Second))
	}
	fmt.Fprintf(w, "task %s: %s; %d lines, %d edits\n", r.TaskID, state, len(r.Lines), len(r.Edits))
	return printLines(w, r.Lines)
}

// printLines writes review lines as a table.
func printLines(w io.Writer, lines []view.ReviewLine) error {
	t := newTable(w, "N", "START", "END", "SPEAKER", "SOURCE", "TEXT")
	for _, l := range lines {
		text := "(translated on approval)"
		if l.Text != nil {
			text = *l.Text
		}
		t.row(l.N, clock(l.StartMS), clock(l.EndMS), orDash(l.Speaker), oneLineText(l.Source), oneLineText(text))
	}
	return t.flush()
}

// reviewEditOptions are the flags of `dubctl review edit`.
type reviewEditOptions struct {
	edit                  dub.LineEdit
	source, text, speaker string
	startMS, endMS        int
	split                 int
	merge, delete, asJSON bool
	changed               func(name string) bool
}

// lineEdit is the edit the flags ask for, checked for what every door
// refuses anyway (one action at a time, a line numbered from 1).
func (o *reviewEditOptions) lineEdit() (dub.LineEdit, error) {
	e := o.edit
	if e.Line < 1 {
		return e, usageError(fmt.Errorf("--line %d: lines are numbered from 1 (see dubctl review show)", e.Line))
	}
	actions := 0
	for _, a := range []struct {
		on   bool
		name string
	}{{o.split != 0, dub.ActionSplit}, {o.merge, dub.ActionMerge}, {o.delete, dub.ActionDelete}} {
		if a.on {
			e.Action, actions = a.name, actions+1
		}
	}
	e.Word = o.split
	if o.changed("source") {
		e.Source = &o.source
	}
	if o.changed("text") {
		e.Text = &o.text
	}
	if o.changed("speaker") {
		e.Speaker = &o.speaker
	}
	if o.changed("start-ms") {
		e.StartMS = &o.startMS
	}
	if o.changed("end-ms") {
		e.EndMS = &o.endMS
	}
	if e.Change != (dub.Change{}) && actions == 0 {
		e.Action = dub.ActionEdit
		actions++
	}
	if actions != 1 {
		return e, usageError(errors.New("give one change: --source, --text, --start-ms, --end-ms, --speaker (together), or --split-at, --merge or --delete"))
	}
	return e, nil
}

// reviewEditCmd builds `dubctl review edit`.
func reviewEditCmd() *cobra.Command {
	var o reviewEditOptions
	cmd := &cobra.Command{
		Use:   "edit TASK_ID --line N (--source S | --text T | --start-ms MS | --end-ms MS | --speaker S | --split-at WORD | --merge | --delete)",
		Short: "Change a line of a task waiting in review",
		Long: `edit changes line N (as "dubctl review show" numbers them) of a task waiting in
review: its source text (the line is translated again on approval unless
--text gives its translation too), its translation (--text "" leaves it to be
made on approval), its start and end in milliseconds, its speaker; or splits it
into two before word WORD (numbered from 1), merges it with the next line, or
deletes it. It prints the edit and the lines after it (--json: the API's
answer).`,
		Args: exactArgs(1),
	}
	o.changed = func(name string) bool { return cmd.Flags().Changed(name) }
	cmd.RunE = taskRun(func() error { _, err := o.lineEdit(); return err },
		func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
			e, _ := o.lineEdit()
			ed, err := b.EditReview(ctx, id, e)
			if err != nil {
				return err
			}
			if o.asJSON {
				return writeJSON(cmd.OutOrStdout(), ed)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s: %s\n", id, view.EditText(ed.Edit))
			return printLines(cmd.OutOrStdout(), ed.Lines)
		})
	f := cmd.Flags()
	f.IntVar(&o.edit.Line, "line", 0, "the line, numbered from 1 (required)")
	f.StringVar(&o.source, "source", "", "its new source text")
	f.StringVar(&o.text, "text", "", "its new translation (empty: made on approval)")
	f.IntVar(&o.startMS, "start-ms", 0, "its new start, in milliseconds")
	f.IntVar(&o.endMS, "end-ms", 0, "its new end, in milliseconds")
	f.StringVar(&o.speaker, "speaker", "", "who says it (empty: not known)")
	f.IntVar(&o.split, "split-at", 0, "split it before this word (numbered from 1)")
	f.BoolVar(&o.merge, "merge", false, "merge it with the next line")
	f.BoolVar(&o.delete, "delete", false, "delete it")
	f.BoolVar(&o.asJSON, "json", false, "print the edit and the lines as JSON")
	_ = cmd.MarkFlagRequired("line")
	return cmd
}

// reviewApproveCmd builds `dubctl review approve`.
func reviewApproveCmd() *cobra.Command {
	var waitOpts waitOptions
	var wait bool
	cmd := &cobra.Command{
		Use:   "approve TASK_ID [--wait [--output FILE]] [--json]",
		Short: "Approve the lines of a task waiting in review: the chain goes on with them",
		Long: `approve lets a task waiting in review go on with its lines as they are: it goes
running, and its translate messages are sent (committed with the approval).
With --wait it then follows the task like "dubctl wait".`,
		Args: exactArgs(1),
	}
	cmd.RunE = taskRun(waitOpts.check, func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
		a, err := b.Approve(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case wait:
			return follow(cmd, b, id, waitOpts)
		case waitOpts.json:
			return writeJSON(cmd.OutOrStdout(), a)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "task %s: %s approved, %d lines go on (%d translate messages)\n", id, a.Stage, a.Lines, a.Batches)
		return nil
	})
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the task until it ends")
	waitOpts.register(cmd)
	return cmd
}

// reviewExportCmd builds `dubctl review export`.
func reviewExportCmd() *cobra.Command {
	var format, text, output string
	cmd := &cobra.Command{
		Use:   "export TASK_ID [--format srt|vtt] [--text source|target] [--output FILE]",
		Short: "Write a task's lines as a subtitle file, to edit elsewhere and import back",
		Long: `export writes the task's lines as SRT (or WebVTT with --format vtt), one cue a
line with its times and speaker: their source text, or with --text target their
translation (by default the translation while the task waits in review of its
translation, else the source). It writes to standard output, or to --output.`,
		Args: exactArgs(1),
	}
	check := func() error {
		if format != string(subtitle.SRT) && format != string(subtitle.WebVTT) {
			return usageError(fmt.Errorf("--format %q: want srt or vtt", format))
		}
		return checkText(text, true)
	}
	cmd.RunE = taskRun(check, func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
		file, err := b.ExportLines(ctx, id, subtitle.Format(format), text)
		if err != nil {
			return err
		}
		if output == "" {
			_, err = rawWriter(cmd.OutOrStdout()).Write(file)
			return err
		}
		return os.WriteFile(output, file, 0o644)
	})
	f := cmd.Flags()
	f.StringVar(&format, "format", "srt", "srt or vtt")
	f.StringVar(&text, "text", "", "source or target (default: the text under review)")
	f.StringVarP(&output, "output", "o", "", "write the file here instead of to standard output")
	return cmd
}

// checkText checks a --text value: source or target ("" too when empty
// is allowed).
func checkText(text string, empty bool) error {
	if text == dub.TextSource || text == dub.TextTarget || (empty && text == "") {
		return nil
	}
	return usageError(fmt.Errorf("--text %q: want source or target", text))
}

// reviewImportCmd builds `dubctl review import`.
func reviewImportCmd() *cobra.Command {
	var file, text string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "import TASK_ID --file FILE [--text source|target] [--json]",
		Short: "Replace a task's lines in review with an edited subtitle file",
		Long: `import reads an SRT or WebVTT file (as export wrote it, edited elsewhere) and
replaces the lines of a task waiting in review with its cues: with --text
source (the default) their times, speakers and source texts (a line keeps its
translation where the file keeps its text unchanged; the others are translated
on approval), with --text target their translations, line for line. The file is
checked as a task's own subtitle file is: a refusal names the file's line.`,
		Args: exactArgs(1),
	}
	cmd.RunE = taskRun(func() error { return checkText(text, false) },
		func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
			data, err := readSubtitles(file)
			if err != nil {
				return err
			}
			ed, err := b.ImportLines(ctx, id, text, data)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), ed)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s: %s\n", id, view.EditText(ed.Edit))
			return printLines(cmd.OutOrStdout(), ed.Lines)
		})
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "the subtitle file (required)")
	f.StringVar(&text, "text", dub.TextSource, "which text the file holds: source or target")
	f.BoolVar(&asJSON, "json", false, "print the import and the lines as JSON")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// maxImportBytes bounds a subtitle file import reads (the console reads a
// JSON body of at most 1 MiB).
const maxImportBytes = 1 << 20

// readSubtitles reads a subtitle file, refusing in both modes alike what
// cannot be sent: a file over maxImportBytes, a file that is not UTF-8
// text (the reader's own refusal, naming its line).
func readSubtitles(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError(fmt.Errorf("--file: %w", err))
	}
	if len(data) > maxImportBytes-4096 {
		return nil, usageError(fmt.Errorf("--file %s: %d bytes, at most %d", path, len(data), maxImportBytes-4096))
	}
	if _, err := subtitle.Parse(data, subtitle.Limits{}); err != nil && !utf8.Valid(data) {
		return nil, usageError(fmt.Errorf("%w: subtitles: %v", dub.ErrInvalidLine, err))
	}
	return data, nil
}
