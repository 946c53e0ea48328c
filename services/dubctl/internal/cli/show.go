package cli

import (
	"context"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// Open runs do on the mode the environment selects (dubctl's database or
// console mode) as a room's B, the part of the mode the room uses, and
// closes it.
type Open[B any] func(cmd *cobra.Command, do func(ctx context.Context, b B) error) error

// Follower is what following a task needs of a mode (T: the read model's
// task, *view.Task): to read the task, to sleep until it may have changed,
// and to download its outputs.
type Follower[T any] interface {
	Task(ctx context.Context, id uuid.UUID) (T, error)
	// Changed returns when task id may have changed, at the latest after
	// within.
	Changed(ctx context.Context, id uuid.UUID, within time.Duration) error
	// Fetch saves the object key of task t to path (at most limit bytes);
	// an object that is not there is shape.ErrNoObject.
	Fetch(ctx context.Context, t T, key, path string, limit int64) error
}

// Follow follows task id until it ends, as `dubctl wait` does, through b:
// submit, redub and review approve with --wait.
type Follow[B any] func(cmd *cobra.Command, b B, id uuid.UUID, o WaitOptions) error

// TaskRun is the RunE of a command that takes a task id and options that
// check themselves: it parses the id, checks the options, then runs fn with
// the backend open gives.
func TaskRun[B any](open Open[B], check func() error,
	fn func(ctx context.Context, cmd *cobra.Command, b B, id uuid.UUID) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := ParseTaskID(args[0])
		if err != nil {
			return err
		}
		if err := check(); err != nil {
			return err
		}
		return open(cmd, func(ctx context.Context, b B) error { return fn(ctx, cmd, b, id) })
	}
}

// Show runs a command that reads and prints what it read, in either mode:
// load it, then write it as indented JSON (asJSON) or for a reader (print).
func Show[B, T any](cmd *cobra.Command, open Open[B], asJSON bool, load func(context.Context, B) (T, error),
	print func(io.Writer, T) error) error {
	return open(cmd, func(ctx context.Context, b B) error {
		v, err := load(ctx, b)
		if err != nil {
			return err
		}
		if asJSON {
			return WriteJSON(cmd.OutOrStdout(), v)
		}
		return print(cmd.OutOrStdout(), v)
	})
}

// ShowCmd completes cmd (its Use, Short and Long set) as a command that
// takes one ID, read by parse (ParseTaskID, ParseID), and shows what load
// reads about it: as JSON with --json (jsonHelp says what that prints), or
// as print writes it.
func ShowCmd[B, K, T any](cmd *cobra.Command, open Open[B], jsonHelp string, parse func(string) (K, error),
	load func(context.Context, B, K) (T, error), print func(io.Writer, T) error) *cobra.Command {
	var asJSON bool
	cmd.Args = ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parse(args[0])
		if err != nil {
			return err
		}
		return Show(cmd, open, asJSON, func(ctx context.Context, b B) (T, error) {
			return load(ctx, b, id)
		}, print)
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, jsonHelp)
	return cmd
}
