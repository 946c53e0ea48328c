package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// pollInterval is how often wait reads the task at the least; in database
// mode a change of its status wakes it at once (task.Listener).
const pollInterval = 500 * time.Millisecond

// Command builds `dubctl wait`, in the mode open gives.
func Command(open cli.Open[Backend]) *cobra.Command {
	var o cli.WaitOptions
	cmd := &cobra.Command{
		Use:   "wait TASK_ID [--output FILE] [--timeout D] [--json]",
		Short: "Follow a task until it ends and download the result",
		Long: `wait shows the task's progress (units of work done: the parts of its steps;
segments translated and synthesized) on stderr until it ends, and, as soon as a
long task's dub begins to play while it is made, the address of that stream (an
HLS playlist: the console's, or the object store's in database mode). When the task is
done it downloads the dubbed video to --output and the subtitles next to
it, SRT and WebVTT, and — when the task asked for subtitles burned in — the
dub with them drawn into the picture as <output>.burned.mp4 (a task of
several languages: one video per language). A failed or cancelled
task prints its error and exits 1; a compensating task (speech synthesis of
some segments still fails) says how to re-drive it and exits 4; a timeout
exits 3.`,
		Args: cli.ExactArgs(1),
		RunE: cli.TaskRun(open, o.Check, func(_ context.Context, cmd *cobra.Command, b Backend, id uuid.UUID) error {
			return Run(cmd, b, id, o)
		}),
	}
	o.Register(cmd)
	return cmd
}

// waited is what wait prints as JSON: the task (the console's shape) and
// the local files it saved.
type waited struct {
	*view.Task
	// OutputPath is the video saved (a task of one language),
	// OutputPaths the video of each language (a parent); SubtitlePaths
	// are the SRT and WebVTT files saved, BurnedPaths the videos with
	// subtitles drawn in.
	OutputPath    string            `json:"outputPath,omitempty"`
	OutputPaths   map[string]string `json:"outputPaths,omitempty"`
	SubtitlePaths []string          `json:"subtitlePaths"`
	BurnedPaths   []string          `json:"burnedPaths,omitempty"`
}

// Run reads the task until it ends or o.Timeout passes (reading again
// whenever b says it may have changed), shows its progress, and reports
// the outcome: a done task's outputs are downloaded.
func Run(cmd *cobra.Command, b Backend, id uuid.UUID, o cli.WaitOptions) error {
	ctx := cmd.Context()
	var shown progressLine
	if !o.JSON {
		shown = newProgressLine(cmd.ErrOrStderr(), cli.IsTerminal(cmd.ErrOrStderr()))
	}
	defer shown.end()
	deadline := time.Now().Add(o.Timeout)
	streamed := false
	for {
		t, err := b.Task(ctx, id)
		if err != nil {
			return err
		}
		if s := t.Stream; s != nil && s.URL != "" && !streamed {
			// A long task's dub plays while it is made: say where, once.
			shown.note(fmt.Sprintf("stream: %s (%.0f s playable so far)", s.URL, s.PlayableSeconds))
			streamed = true
		}
		shown.show(t)
		switch {
		case t.Status == view.Done:
			shown.end()
			return finishDone(cmd, b, t, o)
		case t.Status == view.Cancelled:
			return report(cmd.OutOrStdout(), t, o, cli.WithCode(cli.ExitFailed, fmt.Errorf("task %s was %s", id, t.Error)))
		case view.Ended(t.Status):
			return report(cmd.OutOrStdout(), t, o, cli.WithCode(cli.ExitFailed, fmt.Errorf("task %s %s: %s", id, t.Status, t.Error)))
		case t.Status == view.Review:
			return report(cmd.OutOrStdout(), t, o, cli.WithCode(cli.ExitReview, fmt.Errorf(
				"task %s waits in review of its %s: read and edit its lines with `dubctl review show %s`, then `dubctl review approve %s`",
				id, t.ReviewStage, id, id)))
		case t.Status == view.Compensating:
			return report(cmd.OutOrStdout(), t, o, cli.WithCode(cli.ExitCompensated, fmt.Errorf(
				"task %s is compensating: speech synthesis failed for %d segment(s) after all retries; "+
					"fix the cause, then re-drive it with `tts_requeue -limit 100` (see `dubctl status %s`)",
				id, t.Segments.FailedTTS, id)))
		}
		left := time.Until(deadline)
		if left <= 0 {
			return report(cmd.OutOrStdout(), t, o, cli.WithCode(cli.ExitTimeout, fmt.Errorf(
				"task %s still %s after %s (at step %s); `dubctl wait %s` continues", id, t.Status, o.Timeout,
				t.CurrentStep(), id)))
		}
		if err := b.Changed(ctx, id, min(pollInterval, left)); err != nil {
			return fmt.Errorf("wait for %s: %w", id, err)
		}
	}
}

// report prints the task as JSON (and exits with err's code quietly) or
// returns err for dubctl to print.
func report(out io.Writer, t *view.Task, o cli.WaitOptions, err error) error {
	if !o.JSON {
		return err
	}
	if werr := cli.WriteJSON(out, waited{Task: t, SubtitlePaths: []string{}}); werr != nil {
		return werr
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) {
		return cli.WithCode(ee.Code, &cli.QuietError{Err: err})
	}
	return &cli.QuietError{Err: err}
}
