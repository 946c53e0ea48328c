package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/dubflow/dubflow/services/dubctl/internal/api"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/database"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

// The commands whose shared packages stand too deep in the import graph
// for a room (pkg/retry, pkg/worker): retry, queues pause|resume, workers;
// and their two modes.

// retryCmd builds `dubctl retry`.
func retryCmd() *cobra.Command {
	var speaker string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "retry TASK_ID [--speaker VOICE] [--json]",
		Short: "Run a failed or cancelled task again from its failed step",
		Long: `retry runs a failed (or cancelled) task again: the first step of the pipeline
that has not succeeded publishes each of its unfinished parts again with a
fresh retry budget (earlier attempts stay as history), its dead letters are
marked replayed and the task runs again. A parent is retried through its
failed or cancelled children. A task that did not fail is refused (exit 1).
--speaker retries with another voice (through the console).`,
		Args: cli.ExactArgs(1),
		RunE: cli.TaskRun(open[backend], func() error { return nil }, func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
			r, err := b.Retry(ctx, id, strings.TrimSpace(speaker))
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), r)
			}
			printRetried(cmd.OutOrStdout(), r)
			return nil
		}),
	}
	cmd.Flags().StringVar(&speaker, "speaker", "", "the voice to retry with (a compensating task's way out)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was republished as JSON (the console's answer)")
	return cmd
}

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

// queuesCmd builds `dubctl queues pause|resume`.
func queuesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "Pause and resume a step's workers",
		Long: `queues pause STEP makes every worker of the step stop taking messages within a few
seconds (steps running then finish; its messages wait in the queue); queues
resume STEP lets them take messages again.`,
	}
	cmd.AddCommand(pauseCmd(true), pauseCmd(false))
	return cmd
}

// pauseCmd builds `dubctl queues pause` (paused) or `resume`.
func pauseCmd(paused bool) *cobra.Command {
	verb, short := "resume", "Let a paused step's workers take messages again"
	if paused {
		verb, short = "pause", "Stop a step's workers taking messages (its messages wait)"
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " STEP [--json]",
		Short: short,
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withBackend(cmd, func(ctx context.Context, b backend) error {
				p, err := b.SetPaused(ctx, args[0], paused)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), p)
				}
				printPause(cmd.OutOrStdout(), p)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the step's pause as JSON (the console's answer)")
	return cmd
}

// printPause writes a step's pause state.
func printPause(w io.Writer, p worker.Pause) {
	state := "resumed"
	if p.Paused {
		state = "paused"
	}
	fmt.Fprintf(w, "%s %s by %s at %s\n", p.Step, state, cli.Cell(p.ChangedBy), p.ChangedAt.Local().Format(time.DateTime))
}

// workersCmd builds `dubctl workers`.
func workersCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers [--json]",
		Short: "List the worker processes heard from in the last hour, with what they run now",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Show(cmd, open[backend], asJSON, func(ctx context.Context, b backend) (workerList, error) {
				return b.Workers(ctx)
			}, printWorkers)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (the console's GET /api/workers)")
	return cmd
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
	if _, err := d.Pool(ctx); err != nil {
		return retry.Retried{}, err
	}
	if _, err := d.Publisher(ctx); err != nil {
		return retry.Retried{}, err
	}
	var out retry.Retried
	err := d.Commit(ctx, func(tx pgx.Tx) ([]int64, error) {
		var err error
		out, err = retry.Task(ctx, tx, id, retry.Options{Speaker: strings.TrimSpace(speaker), By: "dubctl"})
		return out.Outbox, err
	})
	var refusal *admit.Error
	if errors.As(err, &refusal) {
		err = cli.UsageError(refusal)
	}
	d.Record(ctx, "retry", id.String(), err)
	if err != nil {
		return retry.Retried{}, err
	}
	return out, nil
}

// SetPaused pauses or resumes a step's workers (worker.SetPaused), as
// POST /api/queues/{step}/pause and /resume do.
func (d dbMode) SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error) {
	pool, err := d.Pool(ctx)
	if err != nil {
		return worker.Pause{}, err
	}
	p, err := worker.SetPaused(ctx, pool, step, paused, d.Actor())
	name := "resume"
	if paused {
		name = "pause"
	}
	d.Record(ctx, name, step, err)
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

// Retry sends POST /api/tasks/{id}/retry, with the voice to retry with
// when one is given.
func (c consoleMode) Retry(ctx context.Context, id uuid.UUID, speaker string) (retry.Retried, error) {
	var r retry.Retried
	if speaker == "" {
		return r, c.Do(ctx, http.MethodPost, api.TaskPath(id, "/retry"), "", nil, &r)
	}
	return r, c.Post(ctx, api.TaskPath(id, "/retry"), map[string]string{"speaker": speaker}, &r)
}

// SetPaused sends POST /api/queues/{step}/pause or /resume.
func (c consoleMode) SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error) {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	var p worker.Pause
	return p, c.Do(ctx, http.MethodPost, "/api/queues/"+url.PathEscape(step)+"/"+verb, "", nil, &p)
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
