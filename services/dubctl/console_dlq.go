package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dubflow/dubflow/pkg/consoleapi"
	"github.com/spf13/cobra"
)

// The console-mode dead-letter commands: dlq list, show and replay.

func (c *consoleClient) dlqListCmd() *cobra.Command {
	var (
		stepName, since string
		pending, asJSON bool
		limit           int
	)
	cmd := &cobra.Command{
		Use:   "list [--step S] [--since T] [--pending] [--json]",
		Short: "List dead letters, newest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"step": {stepName}, "since": {since}, "limit": {fmt.Sprint(limit)},
				"pending": {fmt.Sprint(pending)}}
			var out struct {
				DeadLetters []consoleapi.DeadLetter `json:"deadLetters"`
			}
			if err := c.do(cmd.Context(), http.MethodGet, "/api/dead-letters?"+q.Encode(), "", nil, &out); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out.DeadLetters)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tFAILED\tTASK\tSTEP\tATTEMPT\tCLASS\tSOURCE\tREPLAYED\tREASON")
			for _, d := range out.DeadLetters {
				task, replayed := "-", "no"
				if d.TaskID != nil {
					task = d.TaskID.String()
				}
				if d.ReplayedAt != nil {
					replayed = fmt.Sprintf("%s (%d×)", d.ReplayedAt.Local().Format(time.DateTime), d.ReplayCount)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.FailedAt.Local().Format(time.DateTime),
					task, d.Step, d.Attempt, d.ErrorClass, d.Source, replayed, shorten(d.FailureReason, 100))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&stepName, "step", "", "only dead letters of this step")
	f.StringVar(&since, "since", "", "only those failed since: an RFC 3339 time, a date, or a duration back (2h, 7d)")
	f.BoolVar(&pending, "pending", false, "only those not replayed yet")
	f.IntVar(&limit, "limit", 100, "at most this many (1..1000)")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func (c *consoleClient) dlqShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead letter with its original message (JSON)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return c.printJSON(cmd, fmt.Sprintf("/api/dead-letters/%d", id))
		},
	}
}

func (c *consoleClient) dlqReplayCmd() *cobra.Command {
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "replay ID [--force]",
		Short: "Publish a dead letter's message again with a fresh retry budget",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			body := strings.NewReader(fmt.Sprintf(`{"force":%t}`, force))
			var r struct {
				ID      int64  `json:"id"`
				TaskID  string `json:"taskId"`
				Step    string `json:"step"`
				Attempt int    `json:"attempt"`
			}
			path := fmt.Sprintf("/api/dead-letters/%d/replay", id)
			if err := c.do(cmd.Context(), http.MethodPost, path, "application/json", body, &r); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dead letter %d: task %s %s republished as attempt %d\n", r.ID, r.TaskID, r.Step, r.Attempt)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replay a dead letter that was replayed before")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was replayed as JSON")
	return cmd
}
