package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// statusCmd builds `dubctl status`.
func statusCmd() *cobra.Command {
	return showCmd(&cobra.Command{
		Use:   "status TASK_ID [--json]",
		Short: "Show a task, every step attempt and its segments",
	}, "print one JSON object", parseTaskID, loadTask, printStatus)
}

// printStatus writes the task for a reader.
func printStatus(w io.Writer, v *taskView) error {
	fmt.Fprintf(w, "task      %s\n", v.TaskID)
	fmt.Fprintf(w, "status    %s\n", v.Status)
	fmt.Fprintf(w, "languages %s → %s", v.SourceLanguage, v.TargetLanguage)
	if v.SpeakerID != "" {
		fmt.Fprintf(w, " (speaker %s)", v.SpeakerID)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "source    %s\n", v.SourceVideoKey)
	fmt.Fprintf(w, "output    %s\n", v.OutputVideoKey)
	fmt.Fprintf(w, "trace     %s\n", v.TraceID)
	fmt.Fprintf(w, "created   %s, updated %s\n", v.CreatedAt.Local().Format(time.DateTime), v.UpdatedAt.Local().Format(time.DateTime))
	if v.Error != "" {
		fmt.Fprintf(w, "error     %s\n", v.Error)
	}
	if v.noSpeech() {
		fmt.Fprintln(w, "result    no speech found in the video")
	}
	fmt.Fprintf(w, "segments  %d total, %d translated, %d synthesized, %d failed synthesis\n",
		v.Segments.Total, v.Segments.Translated, v.Segments.Synthesized, v.Segments.FailedTTS)
	printLanguages(w, v)

	fmt.Fprintln(w, "\nsteps")
	steps := newTable(w, "  STEP", "STATUS", "ATTEMPTS", "PARTS", "DURATION")
	for _, s := range v.Steps {
		steps.row("  "+s.Step, s.Status, s.Attempts, s.Parts, span(s.StartedAt, s.FinishedAt))
	}
	if err := steps.flush(); err != nil {
		return err
	}
	if len(v.Attempts) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nattempts")
	attempts := newTable(w, "  STEP", "PART", "ATTEMPT", "STATUS", "WORKER", "STARTED", "FINISHED", "ERROR")
	for _, a := range v.Attempts {
		finished := "-"
		if a.FinishedAt != nil {
			finished = a.FinishedAt.Local().Format("15:04:05.000")
		}
		attempts.row("  "+a.Step, orDash(a.Part), a.Attempt, a.Status, a.Worker,
			a.StartedAt.Local().Format("15:04:05.000"), finished, a.Error)
	}
	return attempts.flush()
}

// span is the duration between two optional times, "-" when unknown.
func span(from, to *time.Time) string {
	if from == nil || to == nil {
		return "-"
	}
	return to.Sub(*from).Round(time.Millisecond).String()
}
