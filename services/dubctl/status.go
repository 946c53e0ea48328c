package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// statusCmd builds `dubctl status`.
func statusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status TASK_ID [--json]",
		Short: "Show a task, every step attempt and its segments",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			c, pool, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer c.close()
			v, err := loadTask(cmd.Context(), pool, id)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			return printStatus(cmd.OutOrStdout(), v)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
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

	fmt.Fprintln(w, "\nsteps")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tSTATUS\tATTEMPTS\tPARTS\tDURATION")
	for _, s := range v.Steps {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\n", s.Step, s.Status, s.Attempts, s.Parts, span(s.StartedAt, s.FinishedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Attempts) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nattempts")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tPART\tATTEMPT\tSTATUS\tWORKER\tSTARTED\tFINISHED\tERROR")
	for _, a := range v.Attempts {
		finished := "-"
		if a.FinishedAt != nil {
			finished = a.FinishedAt.Local().Format("15:04:05.000")
		}
		part := a.Part
		if part == "" {
			part = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Step, part, a.Attempt, a.Status, a.Worker,
			a.StartedAt.Local().Format("15:04:05.000"), finished, a.Error)
	}
	return tw.Flush()
}

// span is the duration between two optional times, "-" when unknown.
func span(from, to *time.Time) string {
	if from == nil || to == nil {
		return "-"
	}
	return to.Sub(*from).Round(time.Millisecond).String()
}
