package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

// listCmd builds `dubctl list`.
func listCmd() *cobra.Command {
	var (
		status string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [--status S] [--limit N] [--json]",
		Short: "List recent tasks, newest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch status {
			case "", taskQueued, taskRunning, taskCompensating, taskDone, taskFailed:
			default:
				return usageError(fmt.Errorf("--status %q: want queued, running, compensating, done or failed", status))
			}
			if limit < 1 || limit > 10000 {
				return usageError(fmt.Errorf("--limit %d: want 1..10000", limit))
			}
			return show(cmd, asJSON, func(ctx context.Context, pool *pgxpool.Pool) ([]taskSummary, error) {
				return listTasks(ctx, pool, status, limit)
			}, printTasks)
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only tasks with this status")
	f.IntVar(&limit, "limit", 20, "at most this many tasks")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
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
