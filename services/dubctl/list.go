package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

// listOptions are the flags of `dubctl list`, in database and console
// mode alike; maxLimit is the most tasks the mode answers with.
type listOptions struct {
	status   string
	limit    int
	asJSON   bool
	maxLimit int
}

// bind adds the flags to cmd.
func (o *listOptions) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.status, "status", "", "only tasks with this status")
	f.IntVar(&o.limit, "limit", 20, fmt.Sprintf("at most this many tasks (1..%d)", o.maxLimit))
	f.BoolVar(&o.asJSON, "json", false, "print a JSON array")
}

// check refuses a status that is none and a limit out of range.
func (o *listOptions) check() error {
	switch o.status {
	case "", taskQueued, taskRunning, taskCompensating, taskDone, taskFailed, taskCancelled:
	default:
		return usageError(fmt.Errorf("--status %q: want queued, running, compensating, done, failed or cancelled", o.status))
	}
	if o.limit < 1 || o.limit > o.maxLimit {
		return usageError(fmt.Errorf("--limit %d: want 1..%d", o.limit, o.maxLimit))
	}
	return nil
}

// listCmd builds `dubctl list`.
func listCmd() *cobra.Command {
	o := &listOptions{maxLimit: 10000}
	cmd := &cobra.Command{
		Use:   "list [--status S] [--limit N] [--json]",
		Short: "List recent tasks, newest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return show(cmd, o.asJSON, func(ctx context.Context, pool *pgxpool.Pool) ([]taskSummary, error) {
				return listTasks(ctx, pool, o.status, o.limit)
			}, printTasks)
		},
	}
	o.bind(cmd)
	return cmd
}

// printTasks writes the tasks as a table.
func printTasks(w io.Writer, tasks []taskSummary) error {
	t := newTable(w, "TASK", "STATUS", "LANGS", "CREATED", "UPDATED", "ERROR")
	for _, task := range tasks {
		t.row(task.TaskID, task.Status, task.SourceLanguage+"→"+task.TargetLanguage,
			task.CreatedAt.Local().Format(time.DateTime), task.UpdatedAt.Local().Format(time.DateTime), task.Error)
	}
	return t.flush()
}
