// Package steps is dubctl's commands over the steps and their workers:
// retry (a failed task run again from its failed step), queues
// pause|resume (a step's workers stop or take messages again) and workers
// (the worker processes heard from). Their shapes are those of pkg/retry
// and pkg/worker, which stand too deep in the import graph for a room:
// main gives them as the type parameters, with the printers that read
// them.
package steps

import (
	"context"
	"io"
	"strings"

	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// Backend is what the commands need of a mode: R is what a retry
// republished (retry.Retried), P a step's pause (worker.Pause), W the
// workers' list.
type Backend[R, P, W any] interface {
	Retry(ctx context.Context, id uuid.UUID, speaker string) (R, error)
	SetPaused(ctx context.Context, step string, paused bool) (P, error)
	Workers(ctx context.Context) (W, error)
}

// Printers write the shapes for a reader.
type Printers[R, P, W any] struct {
	Retried func(io.Writer, R)
	Pause   func(io.Writer, P)
	Workers func(io.Writer, W) error
}

// room builds the commands in the mode open gives.
type room[R, P, W any] struct {
	open  cli.Open[Backend[R, P, W]]
	print Printers[R, P, W]
}

// Commands builds `dubctl retry`, `dubctl queues` and `dubctl workers`.
func Commands[R, P, W any](open cli.Open[Backend[R, P, W]], print Printers[R, P, W]) []*cobra.Command {
	rm := room[R, P, W]{open: open, print: print}
	return []*cobra.Command{rm.retryCmd(), rm.queuesCmd(), rm.workersCmd()}
}

// retryCmd builds `dubctl retry`.
func (rm room[R, P, W]) retryCmd() *cobra.Command {
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
		Args: cli.ExactArgs(1),
		RunE: cli.TaskRun(rm.open, func() error { return nil }, func(ctx context.Context, cmd *cobra.Command, b Backend[R, P, W], id uuid.UUID) error {
			r, err := b.Retry(ctx, id, strings.TrimSpace(speaker))
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), r)
			}
			rm.print.Retried(cmd.OutOrStdout(), r)
			return nil
		}),
	}
	cmd.Flags().StringVar(&speaker, "speaker", "", "the voice to retry with (a compensating task's way out)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was republished as JSON (the console's answer)")
	return cmd
}

// queuesCmd builds `dubctl queues pause|resume`.
func (rm room[R, P, W]) queuesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "Pause and resume a step's workers",
		Long: `queues pause STEP makes every worker of the step stop taking messages within a few
seconds (steps running then finish; its messages wait in the queue); queues
resume STEP lets them take messages again.`,
	}
	cmd.AddCommand(rm.pauseCmd(true), rm.pauseCmd(false))
	return cmd
}

// pauseCmd builds `dubctl queues pause` (paused) or `resume`.
func (rm room[R, P, W]) pauseCmd(paused bool) *cobra.Command {
	verb, short := "resume", "Let a paused step's workers take messages again"
	if paused {
		verb, short = "pause", "Stop a step's workers taking messages (its messages wait)"
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " STEP [--json]",
		Short: short,
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return rm.open(cmd, func(ctx context.Context, b Backend[R, P, W]) error {
				p, err := b.SetPaused(ctx, args[0], paused)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), p)
				}
				rm.print.Pause(cmd.OutOrStdout(), p)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the step's pause as JSON (the console's answer)")
	return cmd
}

// workersCmd builds `dubctl workers`.
func (rm room[R, P, W]) workersCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers [--json]",
		Short: "List the worker processes heard from in the last hour, with what they run now",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Show(cmd, rm.open, asJSON, func(ctx context.Context, b Backend[R, P, W]) (W, error) {
				return b.Workers(ctx)
			}, rm.print.Workers)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (the console's GET /api/workers)")
	return cmd
}
