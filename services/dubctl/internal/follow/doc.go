// Package follow is `dubctl wait` and the --wait of submit, redub and
// review approve: it reads a task until it ends or the time is up (woken
// by the mode when the task may have changed), shows its progress on
// stderr, and reports the end — a done task's outputs downloaded beside
// --output (the video of each language, the subtitles, the burned-in
// dub), within the workers' limits — with dubctl's exit codes.
package follow

import (
	"context"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// Backend is what following a task needs of a mode: to read the task, to
// sleep until it may have changed, and to download its outputs.
type Backend interface {
	Task(ctx context.Context, id uuid.UUID) (*view.Task, error)
	// Changed returns when task id may have changed, at the latest after
	// within.
	Changed(ctx context.Context, id uuid.UUID, within time.Duration) error
	// Fetch saves the object key of task t to path (at most limit bytes);
	// an object that is not there is shape.ErrNoObject.
	Fetch(ctx context.Context, t *view.Task, key, path string, limit int64) error
}
