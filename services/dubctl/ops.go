package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// timelineCmd builds `dubctl timeline`.
func timelineCmd() *cobra.Command {
	return showCmd(&cobra.Command{
		Use:   "timeline TASK_ID [--json]",
		Short: "Show every event of a task in order: attempts, retries, dead letters, operators' actions, its end",
	}, "print one JSON object (the console's GET /api/tasks/{id}/timeline)", parseTaskID,
		func(ctx context.Context, b backend, id uuid.UUID) (taskTimeline, error) { return b.Timeline(ctx, id) },
		printTimeline)
}

// printTimeline writes the events as a table.
func printTimeline(w io.Writer, tl taskTimeline) error {
	t := newTable(w, "AT", "EVENT", "STEP", "PART", "ATTEMPT", "WORKER", "STATUS", "ACTOR", "REF", "DETAIL")
	for _, e := range tl.Events {
		attempt := "-"
		if e.Attempt != nil {
			attempt = fmt.Sprint(*e.Attempt)
		}
		t.row(e.At.Local().Format("2006-01-02 15:04:05.000"), e.Kind, orDash(e.Step), orDash(e.Part), attempt,
			orDash(e.Worker), orDash(e.Status), orDash(e.Actor), orDash(e.Ref), shorten(e.Detail, 100))
	}
	return t.flush()
}

// queuesCmd builds `dubctl queues pause|resume`.
func queuesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "Pause and resume a step's workers",
		Long: `queues pause STEP makes every worker of the step stop taking messages within a few
seconds (steps running then finish; its messages wait in the queue); queues
resume STEP lets them take messages again.`,
	}
	cmd.AddCommand(pauseCmd(true), pauseCmd(false))
	return cmd
}

// pauseCmd builds `dubctl queues pause` (paused) or `resume`.
func pauseCmd(paused bool) *cobra.Command {
	verb, short := "resume", "Let a paused step's workers take messages again"
	if paused {
		verb, short = "pause", "Stop a step's workers taking messages (its messages wait)"
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " STEP [--json]",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withBackend(cmd, func(ctx context.Context, b backend) error {
				p, err := b.SetPaused(ctx, args[0], paused)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), p)
				}
				printPause(cmd.OutOrStdout(), p)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the step's pause as JSON (the console's answer)")
	return cmd
}

// printPause writes a step's pause state.
func printPause(w io.Writer, p worker.Pause) {
	state := "resumed"
	if p.Paused {
		state = "paused"
	}
	fmt.Fprintf(w, "%s %s by %s at %s\n", p.Step, state, cell(p.ChangedBy), p.ChangedAt.Local().Format(time.DateTime))
}

// compensationsCmd builds `dubctl compensations [requeue]`.
func compensationsCmd() *cobra.Command {
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compensations [--limit N] [--json]",
		Short: "List compensating tasks (speech synthesis of some segments failed), oldest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			return show(cmd, asJSON, func(ctx context.Context, b backend) ([]view.Compensation, error) {
				return b.Compensations(ctx, limit)
			}, printCompensations)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many (1..1000)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.AddCommand(requeueCmd())
	return cmd
}

// checkLimit refuses a limit the console refuses.
func checkLimit(limit int) error {
	if limit < 1 || limit > 1000 {
		return usageError(fmt.Errorf("--limit %d: want 1..1000", limit))
	}
	return nil
}

// printCompensations writes the compensating tasks as a table.
func printCompensations(w io.Writer, list []view.Compensation) error {
	t := newTable(w, "TASK", "SINCE", "MISSING SEGMENTS", "LAST ERROR")
	for _, c := range list {
		t.row(c.TaskID, c.UpdatedAt.Local().Format(time.DateTime), fmt.Sprint(c.MissingSegments), shorten(c.LastError, 100))
	}
	return t.flush()
}

// requeueCmd builds `dubctl compensations requeue`.
func requeueCmd() *cobra.Command {
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "requeue [--limit N] [--json]",
		Short: "Re-drive compensating tasks: one tts_requeue pass",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			return withBackend(cmd, func(ctx context.Context, b backend) error {
				r, err := b.Requeue(ctx, limit)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), r)
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
func auditCmd() *cobra.Command {
	var o auditFilter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit [--action A] [--actor NAME] [--target T] [--since T] [--until T] [--limit N] [--json]",
		Short: "List the operators' audit log, newest first: who did what to what, and how it ended",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Limit < 1 || o.Limit > view.MaxPage {
				return usageError(fmt.Errorf("--limit %d: want 1..%d", o.Limit, view.MaxPage))
			}
			var err error
			if o.Since, o.Until, err = timeRange(o.since, o.until); err != nil {
				return err
			}
			return show(cmd, asJSON, func(ctx context.Context, b backend) (audit.Page, error) {
				return b.Audit(ctx, o)
			}, printAudit)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Action, "action", "", "only this action (submit, cancel, retry, redub, replay, purge, pause, resume, requeue, login, ...)")
	f.StringVar(&o.Actor, "actor", "", "only what this token or person did")
	f.StringVar(&o.Target, "target", "", "only what was done to this task id, dead letter id or step")
	f.StringVar(&o.since, "since", "", "only since: an RFC 3339 time, a date, or a duration back (2h, 7d)")
	f.StringVar(&o.until, "until", "", "only before (as --since)")
	f.StringVar(&o.Cursor, "cursor", "", "the page after this one (nextCursor of --json)")
	f.IntVar(&o.Limit, "limit", 50, fmt.Sprintf("at most this many (1..%d)", view.MaxPage))
	f.BoolVar(&asJSON, "json", false, "print the page as JSON (the console's answer)")
	return cmd
}

// printAudit writes the entries as a table.
func printAudit(w io.Writer, p audit.Page) error {
	t := newTable(w, "AT", "ACTOR", "ROLE", "ACTION", "TARGET", "STATUS", "OUTCOME")
	for _, e := range p.Entries {
		t.row(e.At.Local().Format(time.DateTime), e.Actor, e.Role, e.Action, orDash(e.Target), e.Status,
			shorten(strings.TrimSpace(e.Outcome), 100))
	}
	return t.flush()
}

// workersCmd builds `dubctl workers`.
func workersCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers [--json]",
		Short: "List the worker processes heard from in the last hour, with what they run now",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return show(cmd, asJSON, func(ctx context.Context, b backend) (workerList, error) {
				return b.Workers(ctx)
			}, printWorkers)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (the console's GET /api/workers)")
	return cmd
}

// printWorkers writes the processes as a table.
func printWorkers(w io.Writer, l workerList) error {
	t := newTable(w, "SERVICE", "HOST", "PID", "STATUS", "STEPS", "RUNNING", "DONE", "FAILED", "HEARTBEAT")
	for _, p := range l.Workers {
		t.row(p.Service, p.Host, p.PID, p.Status, strings.Join(p.Steps, ","), len(p.Running), p.Done, p.Failed,
			p.HeartbeatAt.Local().Format(time.DateTime))
	}
	return t.flush()
}
