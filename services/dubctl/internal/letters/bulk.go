package letters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/spf13/cobra"
)

// bulkOptions are the filter flags of `dlq replay --all` and `dlq purge`:
// the body of POST /api/dead-letters/replay and /purge (dlq.BulkRequest).
type bulkOptions struct {
	req dlq.BulkRequest
	all bool // purge's --all: every dead letter
}

// register adds the filter flags to cmd; purge adds --pending and --all.
func (o *bulkOptions) register(cmd *cobra.Command, purge bool) {
	f := cmd.Flags()
	f.StringVar(&o.req.Step, "step", "", "only dead letters of this step")
	f.StringVar(&o.req.ErrorClass, "error-class", "", "only dead letters of this error class (permanent, transient, ...)")
	f.StringVar(&o.req.Since, "since", "", "only those failed since: an RFC 3339 time, a date, or a duration back (2h, 7d)")
	f.StringVar(&o.req.Until, "until", "", "only those failed before (as --since)")
	f.BoolVar(&o.req.DryRun, "dry-run", false, "only count what the filters select; change nothing")
	if purge {
		f.BoolVar(&o.req.Pending, "pending", false, "only those not replayed yet")
		f.BoolVar(&o.all, "all", false, "purge every dead letter (no filter)")
	}
}

// filtered reports whether a filter flag or --dry-run was given.
func (o *bulkOptions) filtered() bool {
	r := o.req
	return r.Step != "" || r.ErrorClass != "" || r.Since != "" || r.Until != "" || r.Pending || r.DryRun
}

// check reads the filter as the console does (dlq.BulkRequest.Match), so
// a bad filter is refused with the same text in both modes.
func (o *bulkOptions) check() error {
	if err := checkStep(o.req.Step); err != nil {
		return err
	}
	if _, err := o.req.Match(cli.Now()); err != nil {
		return cli.UsageError(err)
	}
	return nil
}

func (rm room) dlqPurgeCmd() *cobra.Command {
	var o bulkOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "purge (--all | [--step S] [--error-class C] [--since T] [--until T] [--pending]) [--dry-run]",
		Short: "Delete dead letters (each kept in dead_letters_archive)",
		Long: `purge deletes the dead letters the filters select, keeping each, as it was, in
dead_letters_archive with when and by whom it was purged. Without a filter it
needs --all; --dry-run only counts what would be purged.`,
		Args: cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter := o.req.Step != "" || o.req.ErrorClass != "" || o.req.Since != "" || o.req.Until != "" || o.req.Pending
			switch {
			case o.all && filter:
				return cli.UsageError(errors.New("--all purges every dead letter: give it without filters"))
			case !o.all && !filter:
				return cli.UsageError(errors.New("give a filter (--step, --error-class, --since, --until, --pending) or --all"))
			}
			return rm.runBulk(cmd, true, o, asJSON)
		},
	}
	o.register(cmd, true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (the console's answer)")
	return cmd
}

// runBulk runs a bulk replay or purge and prints its result; dead letters
// that could not be replayed make it exit 1 after the result is printed.
func (rm room) runBulk(cmd *cobra.Command, purge bool, o bulkOptions, asJSON bool) error {
	if err := o.check(); err != nil {
		return err
	}
	return rm.open(cmd, func(ctx context.Context, b Backend) error {
		res, err := b.Bulk(ctx, purge, o.req)
		if err != nil {
			return err
		}
		if asJSON {
			if err := cli.WriteJSON(cmd.OutOrStdout(), res); err != nil {
				return err
			}
		} else {
			printBulk(cmd.OutOrStdout(), purge, res)
		}
		if len(res.Errors) > 0 {
			return fmt.Errorf("some dead letters were not replayed: %s", strings.Join(res.Errors, "; "))
		}
		return nil
	})
}

// printBulk writes what a bulk replay or purge did (or, dry, would do).
func printBulk(w io.Writer, purge bool, r dlq.BulkResult) {
	switch {
	case r.DryRun && purge:
		fmt.Fprintf(w, "dry run: %d dead letter(s) would be purged\n", r.Matched)
	case r.DryRun:
		fmt.Fprintf(w, "dry run: %d dead letter(s) match, %d would be replayed\n", r.Matched, r.Replayable)
	case purge:
		fmt.Fprintf(w, "purged %d dead letter(s), kept in dead_letters_archive\n", len(r.Purged))
	default:
		printReplayed(w, r.Replayed)
		fmt.Fprintf(w, "%d dead letter(s) matched, %d replayed\n", r.Matched, len(r.Replayed))
	}
}
