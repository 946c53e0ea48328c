package letters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/spf13/cobra"
)

// dlqCmd builds `dubctl dlq`.
func (rm room) dlqCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, replay and purge dead letters",
		Long: `dlq shows the dead letters the dlq_recorder stored (messages a worker gave up on,
and messages the broker dead-lettered by itself) and replays them after the
cause is fixed: the original message is published again with a fresh retry
budget, the task runs again, and the dead letter is marked replayed.`,
	}
	cmd.AddCommand(rm.dlqListCmd(), rm.dlqShowCmd(), rm.dlqReplayCmd(), rm.dlqPurgeCmd())
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
		return view.DeadLetterFilter{}, cli.UsageError(err)
	}
	if o.limit < 1 || o.limit > 100000 {
		return view.DeadLetterFilter{}, cli.UsageError(fmt.Errorf("--limit %d: want 1..100000", o.limit))
	}
	return view.DeadLetterFilter{Step: o.step, Since: from, Pending: o.pending, Limit: o.limit}, nil
}

func (rm room) dlqListCmd() *cobra.Command {
	var o dlqListOptions
	cmd := &cobra.Command{
		Use:   "list [--step S] [--since T] [--pending] [--json]",
		Short: "List dead letters, newest first",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := o.filter(time.Now())
			if err != nil {
				return err
			}
			return cli.Show(cmd, rm.open, o.json, func(ctx context.Context, b Backend) ([]view.DeadLetter, error) {
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
	t := cli.NewTable(w, "ID", "FAILED", "TASK", "STEP", "PART", "ATTEMPT", "CLASS", "SOURCE", "REPLAYED", "REASON")
	for _, d := range list {
		replayed := "no"
		if d.ReplayedAt != nil {
			replayed = fmt.Sprintf("%s (%d×)", d.ReplayedAt.Local().Format(time.DateTime), d.ReplayCount)
		}
		t.Row(d.ID, d.FailedAt.Local().Format(time.DateTime), taskOrDash(d), d.Step, cli.OrDash(d.Part), d.Attempt,
			d.ErrorClass, d.Source, replayed, cli.Shorten(d.FailureReason, 100))
	}
	return t.Flush()
}

// taskOrDash is the dead letter's task id, "-" when it has none.
func taskOrDash(d view.DeadLetter) string {
	if d.TaskID == nil {
		return "-"
	}
	return d.TaskID.String()
}

func (rm room) dlqShowCmd() *cobra.Command {
	return cli.ShowCmd(&cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one dead letter with its original message",
	}, rm.open, "print JSON", cli.ParseID, func(ctx context.Context, b Backend, id int64) (*view.DeadLetter, error) {
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
	t := cli.NewTable(w)
	for _, kv := range [][2]string{
		{"id", strconv.FormatInt(d.ID, 10)}, {"message id", d.MessageID}, {"task", taskOrDash(*d)},
		{"step", d.Step}, {"part", cli.OrDash(d.Part)}, {"attempt", strconv.Itoa(d.Attempt)}, {"error class", d.ErrorClass},
		{"source", d.Source}, {"routing key", d.RoutingKey},
		{"failed at", d.FailedAt.Format(time.RFC3339)}, {"recorded at", d.RecordedAt.Format(time.RFC3339)},
		{"replayed", replayed}, {"reason", d.FailureReason},
	} {
		t.Row(kv[0]+":", kv[1])
	}
	if err := t.Flush(); err != nil {
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

func checkStep(s string) error {
	if s == "" {
		return nil
	}
	for _, p := range wire.Pipeline {
		if p == s {
			return nil
		}
	}
	return cli.UsageError(fmt.Errorf("--step %q: want one of %v", s, wire.Pipeline))
}
