package review

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// reviewCmd builds `dubctl review`: a task's lines before the voice is
// made, for a task submitted with --review.
func (rm room) reviewCmd() *cobra.Command {
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
		Args: cli.ExactArgs(0),
	}
	cmd.AddCommand(rm.reviewShowCmd(), rm.reviewEditCmd(), rm.reviewApproveCmd(), rm.reviewExportCmd(), rm.reviewImportCmd())
	return cmd
}

// reviewShowCmd builds `dubctl review show`.
func (rm room) reviewShowCmd() *cobra.Command {
	return cli.ShowCmd(&cobra.Command{
		Use:   "show TASK_ID [--json]",
		Short: "List a task's lines in review: times, speaker, source text, translation",
	}, rm.open, "print the review as JSON (GET /api/tasks/{id}/review)", cli.ParseTaskID,
		func(ctx context.Context, b Backend, id uuid.UUID) (*view.TaskReview, error) {
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
	t := cli.NewTable(w, "N", "START", "END", "SPEAKER", "SOURCE", "TEXT")
	for _, l := range lines {
		text := "(translated on approval)"
		if l.Text != nil {
			text = *l.Text
		}
		t.Row(l.N, cli.Clock(l.StartMS), cli.Clock(l.EndMS), cli.OrDash(l.Speaker), cli.OneLineText(l.Source), cli.OneLineText(text))
	}
	return t.Flush()
}

// reviewApproveCmd builds `dubctl review approve`.
func (rm room) reviewApproveCmd() *cobra.Command {
	var waitOpts cli.WaitOptions
	var wait bool
	cmd := &cobra.Command{
		Use:   "approve TASK_ID [--wait [--output FILE]] [--json]",
		Short: "Approve the lines of a task waiting in review: the chain goes on with them",
		Long: `approve lets a task waiting in review go on with its lines as they are: it goes
running, and its translate messages are sent (committed with the approval).
With --wait it then follows the task like "dubctl wait".`,
		Args: cli.ExactArgs(1),
	}
	cmd.RunE = cli.TaskRun(rm.open, waitOpts.Check, func(ctx context.Context, cmd *cobra.Command, b Backend, id uuid.UUID) error {
		a, err := b.Approve(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case wait:
			return rm.follow(cmd, b, id, waitOpts)
		case waitOpts.JSON:
			return cli.WriteJSON(cmd.OutOrStdout(), a)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "task %s: %s approved, %d lines go on (%d translate messages)\n", id, a.Stage, a.Lines, a.Batches)
		return nil
	})
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the task until it ends")
	waitOpts.Register(cmd)
	return cmd
}
