package tasks

import (
	"context"
	"fmt"
	"io"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// defaultCancelReason is a cancel's reason when --reason is not given:
// the task's error reads "cancelled: <reason>".
const defaultCancelReason = "by an operator with dubctl"

// cancelCmd builds `dubctl cancel`.
func (rm room) cancelCmd() *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel TASK_ID [--reason TEXT] [--json]",
		Short: "Cancel a task that is not finished (a parent's children with it)",
		Long: `cancel ends a task that has not ended: it becomes cancelled with the error
"cancelled: <reason>", and its workers' next commit is refused. A parent's
cancel cancels its children that have not ended. A task done, failed or
cancelled already is refused (exit 1). "dubctl retry" runs it again.`,
		Args: cli.ExactArgs(1),
		RunE: cli.TaskRun(rm.open, func() error {
			// The reason's bound is the console's, checked before either mode acts.
			if err := task.CheckCancelReason(reason); err != nil {
				return cli.UsageError(err)
			}
			return nil
		}, func(ctx context.Context, cmd *cobra.Command, b Backend, id uuid.UUID) error {
			s, err := b.Cancel(ctx, id, reason)
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s %s: %s\n", s.TaskID, s.Status, s.Error)
			return nil
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", defaultCancelReason, "why (the task's error reads \"cancelled: <reason>\")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task's summary as JSON (the console's answer)")
	return cmd
}

// timelineCmd builds `dubctl timeline`.
func (rm room) timelineCmd() *cobra.Command {
	return cli.ShowCmd(&cobra.Command{
		Use:   "timeline TASK_ID [--json]",
		Short: "Show every event of a task in order: attempts, retries, dead letters, operators' actions, its end",
	}, rm.open, "print one JSON object (the console's GET /api/tasks/{id}/timeline)", cli.ParseTaskID,
		func(ctx context.Context, b Backend, id uuid.UUID) (taskTimeline, error) {
			evs, err := b.Timeline(ctx, id)
			return taskTimeline{TaskID: id, Events: evs}, err
		},
		printTimeline)
}

// printTimeline writes the events as a table.
func printTimeline(w io.Writer, tl taskTimeline) error {
	t := cli.NewTable(w, "AT", "EVENT", "STEP", "PART", "ATTEMPT", "WORKER", "STATUS", "ACTOR", "REF", "DETAIL")
	for _, e := range tl.Events {
		attempt := "-"
		if e.Attempt != nil {
			attempt = fmt.Sprint(*e.Attempt)
		}
		t.Row(e.At.Local().Format("2006-01-02 15:04:05.000"), e.Kind, cli.OrDash(e.Step), cli.OrDash(e.Part), attempt,
			cli.OrDash(e.Worker), cli.OrDash(e.Status), cli.OrDash(e.Actor), cli.OrDash(e.Ref), cli.Shorten(e.Detail, 100))
	}
	return t.Flush()
}

// taskTimeline is GET /api/tasks/{id}/timeline: every event of a task in
// order (view.Timeline).
type taskTimeline struct {
	TaskID uuid.UUID    `json:"taskId"`
	Events []view.Event `json:"events"`
}
