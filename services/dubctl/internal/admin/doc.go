// Package admin is dubctl's administration: the projects (tenants) and
// their tokens (pkg/tenant), and the run-time settings (pkg/setting), in
// the mode its open gives: the same rows, the same checks, the same text
// and JSON.
package admin

import (
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/spf13/cobra"
)

// Backend is what administration needs of a mode.
type Backend interface {
	tenanter
	configurer
}

// room builds the commands in the mode open gives.
type room struct {
	open cli.Open[Backend]
}

// Commands builds `dubctl project`, `dubctl token` and `dubctl config`.
func Commands(open cli.Open[Backend]) []*cobra.Command {
	rm := room{open: open}
	return []*cobra.Command{rm.projectCmd(), rm.tokenCmd(), rm.configCmd()}
}
