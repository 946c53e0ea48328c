// Package review is `dubctl review`: a task waiting in review shown, its
// lines edited (text, times, speaker; split, merge, delete), exported as a
// subtitle file and imported back, and approved (--wait follows through
// the follow it is given), in the mode its open gives.
package review

import (
	"context"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// Backend is what review needs of a mode: the review and its changes
// (pkg/dub), and what following the task after an approval needs.
type Backend interface {
	Review(ctx context.Context, id uuid.UUID) (*view.TaskReview, error)
	EditReview(ctx context.Context, id uuid.UUID, e dub.LineEdit) (*dub.Edited, error)
	Approve(ctx context.Context, id uuid.UUID) (*dub.Approved, error)
	ExportLines(ctx context.Context, id uuid.UUID, f subtitle.Format, text string) ([]byte, error)
	ImportLines(ctx context.Context, id uuid.UUID, text string, file []byte) (*dub.Edited, error)
	cli.Follower[*view.Task]
}

// room builds the commands in the mode open gives; follow follows a task.
type room struct {
	open   cli.Open[Backend]
	follow cli.Follow[Backend]
}

// Command builds `dubctl review`.
func Command(open cli.Open[Backend], follow cli.Follow[Backend]) *cobra.Command {
	return room{open: open, follow: follow}.reviewCmd()
}
