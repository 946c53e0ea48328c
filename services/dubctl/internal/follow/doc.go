// Package follow is `dubctl wait` and the --wait of submit, redub and
// review approve: it reads a task until it ends or the time is up (woken
// by the mode when the task may have changed), shows its progress on
// stderr, and reports the end — a done task's outputs downloaded beside
// --output (the video of each language, the subtitles, the burned-in
// dub), within the workers' limits — with dubctl's exit codes.
package follow

import (
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
)

// Backend is what following a task needs of a mode.
type Backend = cli.Follower[*view.Task]
