package ops

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/spf13/cobra"
)

// compensationsCmd builds `dubctl compensations [requeue]`.
func (rm room) compensationsCmd() *cobra.Command {
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compensations [--limit N] [--json]",
		Short: "List compensating tasks (speech synthesis of some segments failed), oldest first",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckLimit(limit); err != nil {
				return err
			}
			return cli.Show(cmd, rm.open, asJSON, func(ctx context.Context, b Backend) ([]view.Compensation, error) {
				return b.Compensations(ctx, limit)
			}, printCompensations)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many (1..1000)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.AddCommand(rm.requeueCmd())
	return cmd
}

// printCompensations writes the compensating tasks as a table.
func printCompensations(w io.Writer, list []view.Compensation) error {
	t := cli.NewTable(w, "TASK", "SINCE", "MISSING SEGMENTS", "LAST ERROR")
	for _, c := range list {
		t.Row(c.TaskID, c.UpdatedAt.Local().Format(time.DateTime), fmt.Sprint(c.MissingSegments), cli.Shorten(c.LastError, 100))
	}
	return t.Flush()
}

// requeueCmd builds `dubctl compensations requeue`.
func (rm room) requeueCmd() *cobra.Command {
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "requeue [--limit N] [--json]",
		Short: "Re-drive compensating tasks: one tts_requeue pass",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckLimit(limit); err != nil {
				return err
			}
			return rm.open(cmd, func(ctx context.Context, b Backend) error {
				r, err := b.Requeue(ctx, limit)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), r)
				}
				for _, t := range r.Requeued {
					fmt.Fprintf(cmd.OutOrStdout(), "task %s: segments %v re-driven as tts attempt %d\n", t.TaskID,
						t.MissingSegments, t.Attempt)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d task(s) re-driven\n", len(r.Requeued))
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many tasks (1..1000)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tasks re-driven as JSON (the console's answer)")
	return cmd
}

// auditCmd builds `dubctl audit`.
func (rm room) auditCmd() *cobra.Command {
	var o audit.Filter
	var given shape.Range
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit [--action A] [--actor NAME] [--target T] [--since T] [--until T] [--limit N] [--json]",
		Short: "List the operators' audit log, newest first: who did what to what, and how it ended",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Limit < 1 || o.Limit > view.MaxPage {
				return cli.UsageError(fmt.Errorf("--limit %d: want 1..%d", o.Limit, view.MaxPage))
			}
			var err error
			if o.Since, o.Until, err = cli.TimeRange(dlq.ParseSince, given.Since, given.Until); err != nil {
				return err
			}
			return cli.Show(cmd, rm.open, asJSON, func(ctx context.Context, b Backend) (audit.Page, error) {
				return b.Audit(ctx, o, given)
			}, printAudit)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Action, "action", "", "only this action (submit, cancel, retry, redub, replay, purge, pause, resume, requeue, login, ...)")
	f.StringVar(&o.Actor, "actor", "", "only what this token or person did")
	f.StringVar(&o.Target, "target", "", "only what was done to this task id, dead letter id or step")
	f.StringVar(&given.Since, "since", "", "only since: an RFC 3339 time, a date, or a duration back (2h, 7d)")
	f.StringVar(&given.Until, "until", "", "only before (as --since)")
	f.StringVar(&o.Cursor, "cursor", "", "the page after this one (nextCursor of --json)")
	f.IntVar(&o.Limit, "limit", 50, fmt.Sprintf("at most this many (1..%d)", view.MaxPage))
	f.BoolVar(&asJSON, "json", false, "print the page as JSON (the console's answer)")
	return cmd
}

// printAudit writes the entries as a table.
func printAudit(w io.Writer, p audit.Page) error {
	t := cli.NewTable(w, "AT", "ACTOR", "ROLE", "ACTION", "TARGET", "STATUS", "OUTCOME")
	for _, e := range p.Entries {
		t.Row(e.At.Local().Format(time.DateTime), e.Actor, e.Role, e.Action, cli.OrDash(e.Target), e.Status,
			cli.Shorten(strings.TrimSpace(e.Outcome), 100))
	}
	return t.Flush()
}
