package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
	"github.com/dubflow/dubflow/services/dubctl/internal/steps"
	"github.com/dubflow/dubflow/services/dubctl/internal/submitting"
	"github.com/dubflow/dubflow/services/dubctl/internal/tasks"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

// dubctl runs every command in one of two modes, behind backend: with the
// workers' credentials it reads Postgres through the read model (pkg/view)
// and writes through the same packages the workers use (dbMode,
// internal/database); with CONSOLE_URL and DUBFLOW_API_TOKEN and no
// DATABASE_URL it calls the console's API, which answers the same read
// model (consoleMode, internal/api). The commands are written once, each
// room's against the part of a mode it uses (its Backend); what a retry,
// a pause and the workers stand on is main's (below).

// backend is one of dubctl's two modes.
type backend interface {
	submitting.Backend
	tasks.Backend
	follow.Backend
	letters.Backend
	review.Backend
	ops.Backend
	admin.Backend
	stepsBackend
	Close()
}

// stepsBackend is what internal/steps needs of a mode, with main's shapes.
type stepsBackend = steps.Backend[retry.Retried, worker.Pause, workerList]

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

// What stands on pkg/retry and pkg/worker, too deep in the import graph
// for a room: the shapes of retry, queues pause|resume and workers
// (internal/steps), their printers and their two modes.

// printRetried writes what a retry republished.
func printRetried(w io.Writer, r retry.Retried) {
	fmt.Fprintf(w, "task %s %s\n", r.TaskID, r.Status)
	t := cli.NewTable(w, "  TASK", "STEP", "PART", "ATTEMPT")
	for _, p := range r.Replayed {
		task := r.TaskID
		if p.TaskID != nil {
			task = *p.TaskID
		}
		t.Row("  "+task.String(), p.Step, cli.OrDash(p.Part), p.Attempt)
	}
	_ = t.Flush()
}

// printPause writes a step's pause state.
func printPause(w io.Writer, p worker.Pause) {
	state := "resumed"
	if p.Paused {
		state = "paused"
	}
	fmt.Fprintf(w, "%s %s by %s at %s\n", p.Step, state, cli.Cell(p.ChangedBy), p.ChangedAt.Local().Format(time.DateTime))
}

// printWorkers writes the processes as a table.
func printWorkers(w io.Writer, l workerList) error {
	t := cli.NewTable(w, "SERVICE", "HOST", "PID", "STATUS", "STEPS", "RUNNING", "DONE", "FAILED", "HEARTBEAT")
	for _, p := range l.Workers {
		t.Row(p.Service, p.Host, p.PID, p.Status, strings.Join(p.Steps, ","), len(p.Running), p.Done, p.Failed,
			p.HeartbeatAt.Local().Format(time.DateTime))
	}
	return t.Flush()
}

// dbMode is database mode (internal/database) with main's actions.
type dbMode struct{ *database.Backend }

// Retry runs a failed or cancelled task again from its failed step, or a
// compensating task's speech synthesis, optionally with another speaker
// (retry.Task, what POST /api/tasks/{id}/retry runs).
func (d dbMode) Retry(ctx context.Context, id uuid.UUID, speaker string) (retry.Retried, error) {
	var out retry.Retried
	err := d.Transact(ctx, "retry", id.String(), func(tx pgx.Tx) ([]int64, error) {
		var err error
		out, err = retry.Task(ctx, tx, id, retry.Options{Speaker: strings.TrimSpace(speaker), By: "dubctl"})
		return out.Outbox, err
	})
	if err != nil {
		return retry.Retried{}, err
	}
	return out, nil
}

// SetPaused pauses or resumes a step's workers (worker.SetPaused), as
// POST /api/queues/{step}/pause and /resume do.
func (d dbMode) SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error) {
	name := "resume"
	if paused {
		name = "pause"
	}
	var p worker.Pause
	err := d.Act(ctx, name, step, func(pool *pgxpool.Pool, actor string) (err error) {
		p, err = worker.SetPaused(ctx, pool, step, paused, actor)
		return err
	})
	return p, err
}

// Workers reads the worker processes (worker.Processes).
func (d dbMode) Workers(ctx context.Context) (workerList, error) {
	pool, err := d.Pool(ctx)
	if err != nil {
		return workerList{}, err
	}
	procs, err := worker.Processes(ctx, pool)
	return workersOf(procs), err
}

// consoleMode is console mode (internal/api) with main's actions.
type consoleMode struct{ *api.Client }

// Retry is api.Retry, read as pkg/retry's answer.
func (c consoleMode) Retry(ctx context.Context, id uuid.UUID, speaker string) (retry.Retried, error) {
	return api.Retry[retry.Retried](ctx, c.Client, id, speaker)
}

// SetPaused is api.SetPaused, read as pkg/worker's answer.
func (c consoleMode) SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error) {
	return api.SetPaused[worker.Pause](ctx, c.Client, step, paused)
}

// Workers reads GET /api/workers.
func (c consoleMode) Workers(ctx context.Context) (workerList, error) {
	var w workerList
	err := c.Get(ctx, "/api/workers", &w)
	return workersOf(w.Workers), err
}

// workerList is GET /api/workers: every worker process heard from in the
// last hour (pkg/worker's heartbeats), with what it runs now.
type workerList struct {
	Workers          []worker.Process `json:"workers"`
	HeartbeatSeconds float64          `json:"heartbeatSeconds"`
	LostAfterSeconds float64          `json:"lostAfterSeconds"`
}

// workersOf is the list of procs.
func workersOf(procs []worker.Process) workerList {
	if procs == nil {
		procs = []worker.Process{}
	}
	return workerList{Workers: procs, HeartbeatSeconds: worker.HeartbeatInterval.Seconds(),
		LostAfterSeconds: worker.LostAfter.Seconds()}
}
