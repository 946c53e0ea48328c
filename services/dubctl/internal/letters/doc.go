// Package letters is `dubctl dlq`: the dead letters listed and shown,
// replayed one by one or in bulk by a filter, and purged, in the mode its
// open gives.
package letters

import (
	"context"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/spf13/cobra"
)

// Backend is what the dead letters' commands need of a mode.
type Backend interface {
	DeadLetters(ctx context.Context, f view.DeadLetterFilter) ([]view.DeadLetter, error)
	DeadLetter(ctx context.Context, id int64) (*view.DeadLetter, error)
	Replay(ctx context.Context, id int64, force bool) (dlq.Replayed, error)
	// Bulk replays (purge false) or purges the dead letters b selects.
	Bulk(ctx context.Context, purge bool, b dlq.BulkRequest) (dlq.BulkResult, error)
}

// room builds the commands in the mode open gives.
type room struct {
	open cli.Open[Backend]
}

// Command builds `dubctl dlq`.
func Command(open cli.Open[Backend]) *cobra.Command {
	return room{open: open}.dlqCmd()
}
