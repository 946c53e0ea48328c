package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/spf13/cobra"
)

// dlqCmd builds `dubctl dlq`.
func dlqCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, replay and purge dead letters",
		Long: `dlq shows the dead letters the dlq_recorder stored (messages a worker gave up on,
and messages the broker dead-lettered by itself) and replays them after the
cause is fixed: the original message is published again with a fresh retry
budget, the task runs again, and the dead letter is marked replayed.`,
	}
	cmd.AddCommand(dlqListCmd(), dlqShowCmd(), dlqReplayCmd(), dlqPurgeCmd())
	return cmd
}

// dlqListOptions are the flags of `dubctl dlq list`.
type dlqListOptions struct {
	step, since   string
	pending, json bool
	limit         int
}

func (o *dlqListOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.step, "step", "", "only dead letters of this step")
	f.StringVar(&o.since, "since", "", "only those failed since: an RFC 3339 time, a date, or a duration back (2h, 7d)")
	f.BoolVar(&o.pending, "pending", false, "only those not replayed yet")
	f.IntVar(&o.limit, "limit", 100, "at most this many")
	f.BoolVar(&o.json, "json", false, "print a JSON array")
}

// filter checks the flags and turns them into the list's filter.
func (o *dlqListOptions) filter(now time.Time) (view.DeadLetterFilter, error) {
	if err := checkStep(o.step); err != nil {
		return view.DeadLetterFilter{}, err
	}
	from, err := dlq.ParseSince(o.since, now)
	if err != nil {
		return view.DeadLetterFilter{}, usageError(err)
	}
	if o.limit < 1 || o.limit > 100000 {
		return view.DeadLetterFilter{}, usageError(fmt.Errorf("--limit %d: want 1..100000", o.limit))
	}
	return view.DeadLetterFilter{Step: o.step, Since: from, Pending: o.pending, Limit: o.limit}, nil
}

func dlqListCmd() *cobra.Command {
	var o dlqListOptions
	cmd := &cobra.Command{
		Use:   "list [--step S] [--since T] [--pending] [--json]",
		Short: "List dead letters, newest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := o.filter(time.Now())
			if err != nil {
				return err
			}
			return show(cmd, o.json, func(ctx context.Context, b backend) ([]view.DeadLetter, error) {
				list, err := b.DeadLetters(ctx, f)
				if list == nil {
					list = []view.DeadLetter{} // JSON: [], not null
				}
				return list, err
			}, printDeadLetters)
		},
	}
	o.register(cmd)
	return cmd
}

// printDeadLetters writes the dead letters as a table.
func printDeadLetters(w io.Writer, list []view.DeadLetter) error {
	t := newTable(w, "ID", "FAILED", "TASK", "STEP", "PART", "ATTEMPT", "CLASS", "SOURCE", "REPLAYED", "REASON")
	for _, d := range list {
		replayed := "no"
		if d.ReplayedAt != nil {
			replayed = fmt.Sprintf("%s (%d×)", d.ReplayedAt.Local().Format(time.DateTime), d.ReplayCount)
		}
		t.row(d.ID, d.FailedAt.Local().Format(time.DateTime), taskOrDash(d), d.Step, orDash(d.Part), d.Attempt,
			d.ErrorClass, d.Source, replayed, shorten(d.FailureReason, 100))
	}
	return t.flush()
}

// taskOrDash is the dead letter's task id, "-" when it has none.
func taskOrDash(d view.DeadLetter) string {
	if d.TaskID == nil {
		return "-"
	}
	return d.TaskID.String()
}

func dlqShowCmd() *cobra.Command {
	return showCmd(&cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one dead letter with its original message",
	}, "print JSON", parseID, func(ctx context.Context, b backend, id int64) (*view.DeadLetter, error) {
		return b.DeadLetter(ctx, id)
	}, printDeadLetter)
}

// printDeadLetter writes one dead letter, field by field, then its
// original message.
func printDeadLetter(w io.Writer, d *view.DeadLetter) error {
	replayed := "no"
	if d.ReplayedAt != nil {
		replayed = fmt.Sprintf("%s (%d times)", d.ReplayedAt.Format(time.RFC3339), d.ReplayCount)
	}
	t := newTable(w)
	for _, kv := range [][2]string{
		{"id", strconv.FormatInt(d.ID, 10)}, {"message id", d.MessageID}, {"task", taskOrDash(*d)},
		{"step", d.Step}, {"part", orDash(d.Part)}, {"attempt", strconv.Itoa(d.Attempt)}, {"error class", d.ErrorClass},
		{"source", d.Source}, {"routing key", d.RoutingKey},
		{"failed at", d.FailedAt.Format(time.RFC3339)}, {"recorded at", d.RecordedAt.Format(time.RFC3339)},
		{"replayed", replayed}, {"reason", d.FailureReason},
	} {
		t.row(kv[0]+":", kv[1])
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "original message:")
	if d.OriginalMessage == nil {
		fmt.Fprintln(w, "  (not JSON)")
		return nil
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, d.OriginalMessage, "  ", "  "); err != nil {
		pretty.Reset()
		pretty.Write(d.OriginalMessage)
	}
	fmt.Fprintf(w, "  %s\n", pretty.String())
	return nil
}

// dlqReplayOptions are the flags of `dubctl dlq replay`.
type dlqReplayOptions struct {
	all, force, json bool
	bulk             bulkOptions
}

// check refuses arguments and flags that do not go together.
func (o *dlqReplayOptions) check(args []string) error {
	switch {
	case o.all && len(args) != 0:
		return usageError(errors.New("give an ID or --all, not both"))
	case !o.all && len(args) != 1:
		return usageError(errors.New("give one dead letter ID, or --all"))
	case !o.all && o.bulk.filtered():
		return usageError(errors.New("--step, --error-class, --since, --until and --dry-run go with --all"))
	case o.all && o.force:
		return usageError(errors.New("--force goes with one ID"))
	}
	return checkStep(o.bulk.req.Step)
}

func dlqReplayCmd() *cobra.Command {
	var o dlqReplayOptions
	cmd := &cobra.Command{
		Use:   "replay ID [--force] | --all [--step S] [--error-class C] [--since T] [--until T] [--dry-run]",
		Short: "Publish dead letters' messages again with a fresh retry budget",
		Long: `replay publishes the original message of a dead letter again, with a fresh retry
budget (earlier attempts stay in the step attempts as history), sets its failed task
running again and marks the dead letter replayed. A dead letter is replayed
once: replaying it again needs --force. --all replays every dead letter not
replayed yet that has a task (oldest first, one part once), of those the
filters select; --dry-run only counts them.`,
		Args: func(cmd *cobra.Command, args []string) error { return o.check(args) },
		RunE: func(cmd *cobra.Command, args []string) error { return runReplay(cmd, args, o) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.all, "all", false, "replay every dead letter not replayed yet (that the filters select)")
	f.BoolVar(&o.force, "force", false, "replay a dead letter that was replayed before")
	f.BoolVar(&o.json, "json", false, "print what was replayed as JSON")
	o.bulk.register(cmd, false)
	return cmd
}

// runReplay replays one dead letter (args[0]) or, with --all, the bulk
// replay; what was replayed before an error is printed too.
func runReplay(cmd *cobra.Command, args []string, o dlqReplayOptions) error {
	if o.all {
		o.bulk.req.Pending = true
		return runBulk(cmd, false, o.bulk, o.json)
	}
	id, err := parseID(args[0])
	if err != nil {
		return err
	}
	return withBackend(cmd, func(ctx context.Context, b backend) error {
		var replayed []dlq.Replayed
		r, err := b.Replay(ctx, id, o.force)
		if r.Attempt > 0 {
			replayed = append(replayed, r)
		}
		if o.json {
			if replayed == nil {
				replayed = []dlq.Replayed{}
			}
			if jerr := writeJSON(cmd.OutOrStdout(), replayed); jerr != nil {
				return jerr
			}
			return err
		}
		printReplayed(cmd.OutOrStdout(), replayed)
		return err
	})
}

// printReplayed writes a line for each dead letter replayed.
func printReplayed(w io.Writer, replayed []dlq.Replayed) {
	for _, r := range replayed {
		if r.Attempt == 0 {
			fmt.Fprintf(w, "dead letter %d: task %s %s marked replayed (same part replayed above)\n", r.ID, r.TaskID, r.Step)
			continue
		}
		fmt.Fprintf(w, "dead letter %d: task %s %s republished as attempt %d\n", r.ID, r.TaskID, r.Step, r.Attempt)
	}
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

// orDash shows an empty value (the part of a step that is not fanned out)
// as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
