// Package tasks is dubctl's commands over a task and its lines: status,
// list and search, timeline, segments, versions, redub (--wait follows
// through the follow it is given) and cancel, each in the mode its open
// gives (database or console) with the same output.
package tasks

import (
	"context"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// Backend is what the commands need of a mode: the reads of a task, its
// list, lines, outputs and timeline, a re-dub and a cancel, and what
// following a task after a re-dub needs (Changed, Fetch).
type Backend interface {
	List(ctx context.Context, f view.Filter, given shape.Range) (view.Page, error)
	Segments(ctx context.Context, id uuid.UUID) ([]view.Segment, error)
	Versions(ctx context.Context, id uuid.UUID) ([]view.Version, error)
	Timeline(ctx context.Context, id uuid.UUID) ([]view.Event, error)
	Redub(ctx context.Context, id uuid.UUID, n int, text string) (*dub.Redubbed, error)
	Cancel(ctx context.Context, id uuid.UUID, reason string) (view.Summary, error)
	cli.Follower[*view.Task]
}

// room builds the commands in the mode open gives; follow follows a task.
type room struct {
	open   cli.Open[Backend]
	follow cli.Follow[Backend]
}

// Commands builds the commands.
func Commands(open cli.Open[Backend], follow cli.Follow[Backend]) []*cobra.Command {
	rm := room{open: open, follow: follow}
	return []*cobra.Command{rm.statusCmd(), rm.listCmd(), rm.searchCmd(), rm.timelineCmd(), rm.segmentsCmd(),
		rm.redubCmd(), rm.versionsCmd(), rm.cancelCmd()}
}
