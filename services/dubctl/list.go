package main

import (
	"fmt"
	"text/tabwriter"
	"time"

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
			c, pool, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer c.close()
			tasks, err := listTasks(cmd.Context(), pool, status, limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), tasks)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATUS\tLANGS\tCREATED\tUPDATED\tERROR")
			for _, t := range tasks {
				fmt.Fprintf(tw, "%s\t%s\t%s→%s\t%s\t%s\t%s\n", t.TaskID, t.Status, t.SourceLanguage,
					t.TargetLanguage, t.CreatedAt.Local().Format(time.DateTime),
					t.UpdatedAt.Local().Format(time.DateTime), t.Error)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only tasks with this status")
	f.IntVar(&limit, "limit", 20, "at most this many tasks")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}
