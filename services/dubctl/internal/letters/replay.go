package letters

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/spf13/cobra"
)

// dlqReplayOptions are the flags of `dubctl dlq replay`.
type dlqReplayOptions struct {
	all, force, json bool
	bulk             bulkOptions
}

// check refuses arguments and flags that do not go together.
func (o *dlqReplayOptions) check(args []string) error {
	switch {
	case o.all && len(args) != 0:
		return cli.UsageError(errors.New("give an ID or --all, not both"))
	case !o.all && len(args) != 1:
		return cli.UsageError(errors.New("give one dead letter ID, or --all"))
	case !o.all && o.bulk.filtered():
		return cli.UsageError(errors.New("--step, --error-class, --since, --until and --dry-run go with --all"))
	case o.all && o.force:
		return cli.UsageError(errors.New("--force goes with one ID"))
	}
	return checkStep(o.bulk.req.Step)
}

func (rm room) dlqReplayCmd() *cobra.Command {
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
		RunE: func(cmd *cobra.Command, args []string) error { return rm.runReplay(cmd, args, o) },
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
func (rm room) runReplay(cmd *cobra.Command, args []string, o dlqReplayOptions) error {
	if o.all {
		o.bulk.req.Pending = true
		return rm.runBulk(cmd, false, o.bulk, o.json)
	}
	id, err := cli.ParseID(args[0])
	if err != nil {
		return err
	}
	return rm.open(cmd, func(ctx context.Context, b Backend) error {
		var replayed []dlq.Replayed
		r, err := b.Replay(ctx, id, o.force)
		if r.Attempt > 0 {
			replayed = append(replayed, r)
		}
		if o.json {
			if replayed == nil {
				replayed = []dlq.Replayed{}
			}
			if jerr := cli.WriteJSON(cmd.OutOrStdout(), replayed); jerr != nil {
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
