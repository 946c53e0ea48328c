package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// defaultCancelReason is a cancel's reason when --reason is not given:
// the task's error reads "cancelled: <reason>".
const defaultCancelReason = "by an operator with dubctl"

// cancelCmd builds `dubctl cancel`.
func cancelCmd() *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel TASK_ID [--reason TEXT] [--json]",
		Short: "Cancel a task that is not finished (a parent's children with it)",
		Long: `cancel ends a task that has not ended: it becomes cancelled with the error
"cancelled: <reason>", and its workers' next commit is refused. A parent's
cancel cancels its children that have not ended. A task done, failed or
cancelled already is refused (exit 1). "dubctl retry" runs it again.`,
		Args: exactArgs(1),
		RunE: taskRun(func() error {
			// The reason's bound is the console's, checked before either mode acts.
			if err := task.CheckCancelReason(reason); err != nil {
				return usageError(err)
			}
			return nil
		}, func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
			s, err := b.Cancel(ctx, id, reason)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s %s: %s\n", s.TaskID, s.Status, s.Error)
			return nil
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", defaultCancelReason, "why (the task's error reads \"cancelled: <reason>\")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task's summary as JSON (the console's answer)")
	return cmd
}

// retryCmd builds `dubctl retry`.
func retryCmd() *cobra.Command {
	var speaker string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "retry TASK_ID [--speaker VOICE] [--json]",
		Short: "Run a failed or cancelled task again from its failed step",
		Long: `retry runs a failed (or cancelled) task again: the first step of the pipeline
that has not succeeded publishes each of its unfinished parts again with a
fresh retry budget (earlier attempts stay as history), its dead letters are
marked replayed and the task runs again. A parent is retried through its
failed or cancelled children. A task that did not fail is refused (exit 1).
--speaker retries with another voice (through the console).`,
		Args: exactArgs(1),
		RunE: taskRun(func() error { return nil }, func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
			r, err := b.Retry(ctx, id, strings.TrimSpace(speaker))
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			printRetried(cmd.OutOrStdout(), r)
			return nil
		}),
	}
	cmd.Flags().StringVar(&speaker, "speaker", "", "the voice to retry with (a compensating task's way out)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was republished as JSON (the console's answer)")
	return cmd
}

// printRetried writes what a retry republished.
func printRetried(w io.Writer, r retried) {
	fmt.Fprintf(w, "task %s %s\n", r.TaskID, r.Status)
	t := newTable(w, "  TASK", "STEP", "PART", "ATTEMPT")
	for _, p := range r.Replayed {
		task := r.TaskID
		if p.TaskID != nil {
			task = *p.TaskID
		}
		t.row("  "+task.String(), p.Step, orDash(p.Part), p.Attempt)
	}
	_ = t.flush()
}
