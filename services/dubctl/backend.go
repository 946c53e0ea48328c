package main

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// dubctl runs every command in one of two modes, behind backend: with the
// workers' credentials it reads Postgres through the read model (pkg/view)
// and writes through the same packages the workers use (dbBackend, db.go);
// with CONSOLE_URL and DUBFLOW_API_TOKEN and no DATABASE_URL it calls the
// console's API, which answers the same read model (consoleBackend,
// console.go). The commands above it are written once.

// reader reads tasks, their lines, outputs and timelines, dead letters,
// compensating tasks, the audit log and the worker processes.
type reader interface {
	Task(ctx context.Context, id uuid.UUID) (*view.Task, error)
	List(ctx context.Context, f listFilter) (view.Page, error)
	Segments(ctx context.Context, id uuid.UUID) ([]view.Segment, error)
	Review(ctx context.Context, id uuid.UUID) (*view.TaskReview, error)
	Versions(ctx context.Context, id uuid.UUID) ([]view.Version, error)
	Timeline(ctx context.Context, id uuid.UUID) (taskTimeline, error)
	DeadLetters(ctx context.Context, f view.DeadLetterFilter) ([]view.DeadLetter, error)
	DeadLetter(ctx context.Context, id int64) (*view.DeadLetter, error)
	Compensations(ctx context.Context, limit int) ([]view.Compensation, error)
	Audit(ctx context.Context, f auditFilter) (audit.Page, error)
	Workers(ctx context.Context) (workerList, error)
}

// actor changes things, as the console's audited routes do: a new task, a
// re-dub, a review's edit and approval, a cancel, a retry, replays and purges of dead letters, a pause
// of a step, a re-drive of compensating tasks. In database mode each
// writes the audit row the console writes (dbaudit.go).
type actor interface {
	Submit(ctx context.Context, s submission) (uuid.UUID, error)
	Redub(ctx context.Context, id uuid.UUID, n int, text string) (*dub.Redubbed, error)
	// EditReview and Approve change a task in review (pkg/dub).
	EditReview(ctx context.Context, id uuid.UUID, e dub.LineEdit) (*dub.Edited, error)
	Approve(ctx context.Context, id uuid.UUID) (*dub.Approved, error)
	// ExportLines and ImportLines take a task's lines out as a subtitle
	// file and back.
	ExportLines(ctx context.Context, id uuid.UUID, f subtitle.Format, text string) ([]byte, error)
	ImportLines(ctx context.Context, id uuid.UUID, text string, file []byte) (*dub.Edited, error)
	Cancel(ctx context.Context, id uuid.UUID, reason string) (view.Summary, error)
	Retry(ctx context.Context, id uuid.UUID, speaker string) (retried, error)
	Replay(ctx context.Context, id int64, force bool) (dlq.Replayed, error)
	// Bulk replays (purge false) or purges the dead letters b selects.
	Bulk(ctx context.Context, purge bool, b dlq.BulkRequest) (dlq.BulkResult, error)
	SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error)
	Requeue(ctx context.Context, limit int) (requeued, error)
}

// follower is what wait needs beyond reading the task: to sleep until it
// may have changed, and to download its outputs.
type follower interface {
	// Changed returns when task id may have changed, at the latest after
	// within.
	Changed(ctx context.Context, id uuid.UUID, within time.Duration) error
	// Fetch saves the object key of task t to path (at most limit bytes);
	// an object that is not there is errNoObject.
	Fetch(ctx context.Context, t *view.Task, key, path string, limit int64) error
}

// backend is one of dubctl's two modes.
type backend interface {
	reader
	actor
	follower
	admitter
	Close()
}

// errNoObject is returned by Fetch for an object that does not exist.
var errNoObject = errors.New("no such object")

// openBackend picks the mode from the environment: the console when
// CONSOLE_URL and DUBFLOW_API_TOKEN are set and DATABASE_URL is not, the
// database otherwise. as is --as: who acts, for the audit log of the
// database mode (the console names its token's). Warnings go to warn.
func openBackend(getenv func(string) string, warn io.Writer, as string) (backend, error) {
	if c := consoleFromEnv(getenv); c != nil {
		if as != "" {
			return nil, usageError(errors.New("--as names who acts in database mode; through the console the audit log names the token"))
		}
		return c, nil
	}
	who, err := actorName(as, getenv)
	if err != nil {
		return nil, err
	}
	return newDBBackend(warn, who)
}

// withBackend runs do on the mode the environment selects and closes it.
func withBackend(cmd *cobra.Command, do func(ctx context.Context, b backend) error) error {
	as, _ := cmd.Flags().GetString("as")
	b, err := openBackend(os.Getenv, cmd.ErrOrStderr(), as)
	if err != nil {
		return err
	}
	defer b.Close()
	return do(cmd.Context(), b)
}
