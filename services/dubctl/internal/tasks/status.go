package tasks

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// This file is dubctl's side of a task that dubs into several languages
// at once: `submit --target es,ca`, the children in `status`, and the
// outputs `wait` downloads, one per language.

// PrintLanguages writes a parent's languages and children, or a child's
// parent.
func PrintLanguages(w io.Writer, t *view.Task) {
	f := t.Languages
	if f == nil {
		return
	}
	if f.ParentTaskID != nil {
		fmt.Fprintf(w, "parent    %s (one of its languages; extract_audio and asr ran there)\n", *f.ParentTaskID)
		return
	}
	fmt.Fprintf(w, "targets   %s (transcribed once, one child task per language)\n", strings.Join(f.TargetLanguages, ", "))
	if len(f.Children) == 0 {
		fmt.Fprintln(w, "children  none yet: they start where the transcription ends")
		return
	}
	fmt.Fprintln(w, "\nchildren")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LANGUAGE\tTASK\tSTATUS\tOUTPUT\tERROR")
	for _, c := range f.Children {
		output := c.OutputVideoKey
		if c.Status != view.Done {
			output = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.TargetLanguage, c.TaskID, c.Status, output, c.Error)
	}
	_ = tw.Flush()
}

// statusCmd builds `dubctl status`.
func (rm room) statusCmd() *cobra.Command {
	return cli.ShowCmd(&cobra.Command{
		Use:   "status TASK_ID [--json]",
		Short: "Show a task, every step attempt, its segments and, for a parent, its children",
	}, rm.open, "print one JSON object (the console's GET /api/tasks/{id})", cli.ParseTaskID,
		func(ctx context.Context, b Backend, id uuid.UUID) (*view.Task, error) { return b.Task(ctx, id) }, printStatus)
}

// printStatus writes the task for a reader.
func printStatus(w io.Writer, t *view.Task) error {
	fmt.Fprintf(w, "task      %s\n", t.TaskID)
	fmt.Fprintf(w, "status    %s\n", t.Status)
	fmt.Fprintf(w, "languages %s → %s", t.SourceLanguage, t.TargetLanguage)
	if t.SpeakerID != "" {
		fmt.Fprintf(w, " (speaker %s)", t.SpeakerID)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "source    %s\n", t.SourceVideoKey)
	if t.OutputVideoKey != "" {
		fmt.Fprintf(w, "output    %s\n", t.OutputVideoKey)
	}
	fmt.Fprintf(w, "trace     %s\n", t.TraceID)
	fmt.Fprintf(w, "created   %s, updated %s\n", t.CreatedAt.Local().Format(time.DateTime), t.UpdatedAt.Local().Format(time.DateTime))
	if t.Error != "" {
		fmt.Fprintf(w, "error     %s\n", t.Error)
	}
	if t.Waiting != nil {
		fmt.Fprintf(w, "waiting   %s: %s\n", t.Waiting.Step, t.Waiting.Message)
	}
	if t.NoSpeech() {
		fmt.Fprintln(w, "result    no speech found in the video")
	}
	fmt.Fprintf(w, "segments  %d total, %d translated, %d synthesized, %d failed synthesis\n",
		t.Segments.Total, t.Segments.Translated, t.Segments.Synthesized, t.Segments.FailedTTS)
	PrintLanguages(w, t)

	fmt.Fprintln(w, "\nsteps")
	steps := cli.NewTable(w, "  STEP", "STATUS", "ATTEMPTS", "PARTS", "DURATION")
	for _, s := range t.Steps {
		steps.Row("  "+s.Step, s.Status, s.Attempts, len(s.Parts), cli.Span(s.StartedAt, s.FinishedAt))
	}
	if err := steps.Flush(); err != nil {
		return err
	}
	if t.IsParent() {
		fmt.Fprintln(w, "  (translate, tts and mux_video run in each child)")
	}
	return printAttempts(w, t)
}

// printAttempts writes every attempt of the task, if it has any.
func printAttempts(w io.Writer, t *view.Task) error {
	attempts := cli.NewTable(w, "  STEP", "PART", "ATTEMPT", "STATUS", "WORKER", "STARTED", "FINISHED", "ERROR")
	n := 0
	for _, s := range t.Steps {
		for _, p := range s.Parts {
			for _, a := range p.Attempts {
				if n == 0 {
					fmt.Fprintln(w, "\nattempts")
				}
				n++
				finished := "-"
				if a.FinishedAt != nil {
					finished = a.FinishedAt.Local().Format("15:04:05.000")
				}
				attempts.Row("  "+s.Step, cli.OrDash(p.Part), a.Attempt, a.Status, a.Worker,
					a.StartedAt.Local().Format("15:04:05.000"), finished, a.Error)
			}
		}
	}
	if n == 0 {
		return nil
	}
	return attempts.Flush()
}
