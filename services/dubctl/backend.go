package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/dubflow/dubflow/services/dubctl/internal/admin"
	"github.com/dubflow/dubflow/services/dubctl/internal/api"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/database"
	"github.com/dubflow/dubflow/services/dubctl/internal/follow"
	"github.com/dubflow/dubflow/services/dubctl/internal/letters"
	"github.com/dubflow/dubflow/services/dubctl/internal/ops"
	"github.com/dubflow/dubflow/services/dubctl/internal/review"
	"github.com/dubflow/dubflow/services/dubctl/internal/submitting"
	"github.com/dubflow/dubflow/services/dubctl/internal/tasks"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// dubctl runs every command in one of two modes, behind backend: with the
// workers' credentials it reads Postgres through the read model (pkg/view)
// and writes through the same packages the workers use (dbMode,
// internal/database); with CONSOLE_URL and DUBFLOW_API_TOKEN and no
// DATABASE_URL it calls the console's API, which answers the same read
// model (consoleMode, internal/api). The commands are written once, each
// room's against the part of a mode it uses (its Backend); a retry, a
// pause and the workers are main's (ops.go).

// backend is one of dubctl's two modes.
type backend interface {
	submitting.Backend
	tasks.Backend
	follow.Backend
	letters.Backend
	review.Backend
	ops.Backend
	admin.Backend
	Retry(ctx context.Context, id uuid.UUID, speaker string) (retry.Retried, error)
	SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error)
	Workers(ctx context.Context) (workerList, error)
	Close()
}

var (
	_ backend = dbMode{}
	_ backend = consoleMode{}
)

// openBackend picks the mode from the environment: the console when
// CONSOLE_URL and DUBFLOW_API_TOKEN are set and DATABASE_URL is not, the
// database otherwise. as is --as: who acts, for the audit log of the
// database mode (the console names its token's). Warnings go to warn.
func openBackend(getenv func(string) string, warn io.Writer, as string) (backend, error) {
	if c := api.FromEnv(getenv); c != nil {
		if as != "" {
			return nil, cli.UsageError(errors.New("--as names who acts in database mode; through the console the audit log names the token"))
		}
		return consoleMode{c}, nil
	}
	who, err := database.ActorName(as, getenv)
	if err != nil {
		return nil, err
	}
	d, err := database.Open(warn, who, database.Known{NotFound: []error{worker.ErrUnknownStep},
		Conflict: []error{retry.ErrRefused}})
	if err != nil {
		return nil, err
	}
	return dbMode{d}, nil
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

// open is withBackend for a room, which sees the mode as its Backend B.
func open[B any](cmd *cobra.Command, do func(ctx context.Context, b B) error) error {
	return withBackend(cmd, func(ctx context.Context, b backend) error { return do(ctx, any(b).(B)) })
}

// followAs is follow.Run for a room, which follows a task through its
// Backend B.
func followAs[B follow.Backend](cmd *cobra.Command, b B, id uuid.UUID, o cli.WaitOptions) error {
	return follow.Run(cmd, b, id, o)
}
