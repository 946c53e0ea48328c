// Package ops is dubctl's operations beyond one task: the compensating
// tasks listed and re-driven (one tts_requeue pass), and the operators'
// audit log, in the mode its open gives.
package ops

import (
	"context"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/spf13/cobra"
)

// Backend is what the operations need of a mode.
type Backend interface {
	Compensations(ctx context.Context, limit int) ([]view.Compensation, error)
	Requeue(ctx context.Context, limit int) (shape.Requeued, error)
	Audit(ctx context.Context, f audit.Filter, given shape.Range) (audit.Page, error)
}

// room builds the commands in the mode open gives.
type room struct {
	open cli.Open[Backend]
}

// Commands builds `dubctl compensations` and `dubctl audit`.
func Commands(open cli.Open[Backend]) []*cobra.Command {
	rm := room{open: open}
	return []*cobra.Command{rm.compensationsCmd(), rm.auditCmd()}
}
