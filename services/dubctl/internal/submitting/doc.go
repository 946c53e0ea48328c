// Package submitting is `dubctl submit` — every check of a video and its
// options before anything is uploaded (pkg/admit, the media probed
// locally), then the task created in the mode its open gives (--wait
// follows through the follow it is given) — and `dubctl sample`, a short
// video with real speech to submit.
package submitting

import (
	"context"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// Backend is what submitting needs of a mode: the rules to judge by, the
// submission, and what following the task needs.
type Backend interface {
	admitter
	Submit(ctx context.Context, s shape.Submission) (uuid.UUID, error)
	cli.Follower[*view.Task]
}

// room builds the commands in the mode open gives; follow follows a task.
type room struct {
	open   cli.Open[Backend]
	follow cli.Follow[Backend]
}

// Commands builds `dubctl submit` and `dubctl sample`.
func Commands(open cli.Open[Backend], follow cli.Follow[Backend]) []*cobra.Command {
	rm := room{open: open, follow: follow}
	return []*cobra.Command{rm.submitCmd(), rm.sampleCmd()}
}
