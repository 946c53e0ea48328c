package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/dlq"
	"github.com/spf13/cobra"
)

// dlqCmd builds `dubctl dlq`.
func dlqCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and replay dead letters",
		Long: `dlq shows the dead letters the dlq_recorder stored (messages a worker gave up on,
and messages the broker dead-lettered by itself) and replays them after the
cause is fixed: the original message is published again with a fresh retry
budget, the task runs again, and the dead letter is marked replayed.`,
	}
	cmd.AddCommand(dlqListCmd(), dlqShowCmd(), dlqReplayCmd())
	return cmd
}

func dlqListCmd() *cobra.Command {
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
			if err := checkStep(stepName); err != nil {
				return err
			}
			from, err := dlq.ParseSince(since, time.Now())
			if err != nil {
				return usageError(err)
			}
			if limit < 1 || limit > 100000 {
				return usageError(fmt.Errorf("--limit %d: want 1..100000", limit))
			}
			c, pool, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer c.close()
			list, err := dlq.List(cmd.Context(), pool, dlq.Filter{Step: stepName, Since: from, Pending: pending, Limit: limit})
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []dlq.DeadLetter{}
				}
				return writeJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tFAILED\tTASK\tSTEP\tATTEMPT\tCLASS\tSOURCE\tREPLAYED\tREASON")
			for _, d := range list {
				task := "-"
				if d.TaskID != nil {
					task = d.TaskID.String()
				}
				replayed := "no"
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
	f.IntVar(&limit, "limit", 100, "at most this many")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func dlqShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one dead letter with its original message",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			c, pool, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer c.close()
			d, err := dlq.Get(cmd.Context(), pool, id)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			w := cmd.OutOrStdout()
			task := "-"
			if d.TaskID != nil {
				task = d.TaskID.String()
			}
			replayed := "no"
			if d.ReplayedAt != nil {
				replayed = fmt.Sprintf("%s (%d times)", d.ReplayedAt.Format(time.RFC3339), d.ReplayCount)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, kv := range [][2]string{
				{"id", strconv.FormatInt(d.ID, 10)}, {"message id", d.MessageID}, {"task", task},
				{"step", d.Step}, {"attempt", strconv.Itoa(d.Attempt)}, {"error class", d.ErrorClass},
				{"source", d.Source}, {"routing key", d.RoutingKey},
				{"failed at", d.FailedAt.Format(time.RFC3339)}, {"recorded at", d.RecordedAt.Format(time.RFC3339)},
				{"replayed", replayed}, {"reason", d.FailureReason},
			} {
				fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(w, "original message:")
			if d.OriginalMessage == nil {
				fmt.Fprintf(w, "  (not JSON; %d raw bytes)\n", len(d.RawBody))
				return nil
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, d.OriginalMessage, "  ", "  "); err != nil {
				pretty.Reset()
				pretty.Write(d.OriginalMessage)
			}
			fmt.Fprintf(w, "  %s\n", pretty.String())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func dlqReplayCmd() *cobra.Command {
	var (
		all, force, asJSON bool
		stepName           string
	)
	cmd := &cobra.Command{
		Use:   "replay ID | --all [--step S]",
		Short: "Publish dead letters' messages again with a fresh retry budget",
		Long: `replay publishes the original message of a dead letter again, with a fresh retry
budget (earlier attempts stay in task_steps as history), sets its failed task
running again and marks the dead letter replayed. A dead letter is replayed
once: replaying it again needs --force. --all replays every dead letter not
replayed yet (of one step with --step).`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) != 0:
				return usageError(errors.New("give an ID or --all, not both"))
			case !all && len(args) != 1:
				return usageError(errors.New("give one dead letter ID, or --all"))
			case !all && stepName != "":
				return usageError(errors.New("--step goes with --all"))
			case all && force:
				return usageError(errors.New("--force goes with one ID"))
			}
			return checkStep(stepName)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var id int64
			if !all {
				var err error
				if id, err = parseID(args[0]); err != nil {
					return err
				}
			}
			c, pool, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer c.close()
			pub, err := c.publisher(cmd.Context())
			if err != nil {
				return err
			}
			var replayed []dlq.Replayed
			if all {
				replayed, err = dlq.ReplayAll(cmd.Context(), pool, pub, stepName)
			} else {
				var r dlq.Replayed
				r, err = dlq.Replay(cmd.Context(), pool, pub, id, dlq.Options{Force: force})
				if r.Attempt > 0 {
					replayed = append(replayed, r)
				}
			}
			if asJSON {
				if replayed == nil {
					replayed = []dlq.Replayed{}
				}
				if jerr := writeJSON(cmd.OutOrStdout(), replayed); jerr != nil {
					return jerr
				}
			} else {
				for _, r := range replayed {
					if r.Attempt == 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "dead letter %d: task %s %s marked replayed (same part replayed above)\n",
							r.ID, r.TaskID, r.Step)
						continue
					}
					fmt.Fprintf(cmd.OutOrStdout(), "dead letter %d: task %s %s republished as attempt %d\n",
						r.ID, r.TaskID, r.Step, r.Attempt)
				}
				if all && len(replayed) == 0 && err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), "no dead letters to replay")
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "replay every dead letter not replayed yet")
	f.StringVar(&stepName, "step", "", "with --all: only dead letters of this step")
	f.BoolVar(&force, "force", false, "replay a dead letter that was replayed before")
	f.BoolVar(&asJSON, "json", false, "print what was replayed as JSON")
	return cmd
}

func checkStep(s string) error {
	if s == "" {
		return nil
	}
	for _, p := range wire.Pipeline {
		if p == s {
			return nil
		}
	}
	return usageError(fmt.Errorf("--step %q: want one of %v", s, wire.Pipeline))
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usageError(fmt.Errorf("dead letter ID %q: want a positive number (see dubctl dlq list)", s))
	}
	return id, nil
}

// shorten cuts s to n runes for a table cell.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
