package main

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The operators' actions and reads in database mode beyond submit, redub
// and replay (db.go): each calls the package the console's route calls,
// and writes the same audit row (dbaudit.go).

// Cancel ends a task that is not finished (task.Cancel, a parent's
// children with it) and answers its summary, as POST
// /api/tasks/{id}/cancel does.
func (d *dbBackend) Cancel(ctx context.Context, id uuid.UUID, reason string) (view.Summary, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return view.Summary{}, err
	}
	if _, err := d.publisher(ctx); err != nil {
		return view.Summary{}, err
	}
	err = d.commit(ctx, func(tx pgx.Tx) ([]int64, error) {
		res, err := task.Apply(ctx, tx, task.Cancel(task.Ref{ID: id}, reason))
		return []int64{res.EventID}, err
	})
	d.record(ctx, actionOf("cancel", id.String(), http.StatusOK), err)
	if err != nil {
		return view.Summary{}, err
	}
	return view.LoadSummary(ctx, pool, id)
}

// Retry runs a failed or cancelled task again from its failed step, or a
// compensating task's speech synthesis, optionally with another speaker
// (retry.Task, what POST /api/tasks/{id}/retry runs).
func (d *dbBackend) Retry(ctx context.Context, id uuid.UUID, speaker string) (retried, error) {
	if _, err := d.db(ctx); err != nil {
		return retried{}, err
	}
	if _, err := d.publisher(ctx); err != nil {
		return retried{}, err
	}
	var out retry.Retried
	err := d.commit(ctx, func(tx pgx.Tx) ([]int64, error) {
		var err error
		out, err = retry.Task(ctx, tx, id, retry.Options{Speaker: strings.TrimSpace(speaker), By: "dubctl"})
		return out.Outbox, err
	})
	var refusal *admit.Error
	if errors.As(err, &refusal) {
		err = usageError(refusal)
	}
	d.record(ctx, actionOf("retry", id.String(), http.StatusOK), err)
	if err != nil {
		return retried{}, err
	}
	return out, nil
}

// Bulk replays or purges the dead letters b selects (dlq.BulkReplay,
// dlq.BulkPurge), as POST /api/dead-letters/replay and /purge do.
func (d *dbBackend) Bulk(ctx context.Context, purge bool, b dlq.BulkRequest) (dlq.BulkResult, error) {
	m, err := b.Match(now())
	if err != nil {
		return dlq.BulkResult{}, usageError(err)
	}
	pool, err := d.db(ctx)
	if err != nil {
		return dlq.BulkResult{}, err
	}
	name := "purge"
	var out dlq.BulkResult
	if purge {
		out, err = dlq.BulkPurge(ctx, pool, b, m, d.actor)
	} else {
		name = "replay"
		pub, perr := d.publisher(ctx)
		if perr != nil {
			return dlq.BulkResult{}, perr
		}
		out, err = dlq.BulkReplay(ctx, pool, pub, b, m)
	}
	a := actionOf(name, "", http.StatusOK)
	if err == nil {
		a.detail = out.AuditDetail()
	}
	d.record(ctx, a, err)
	return out, err
}

// SetPaused pauses or resumes a step's workers (worker.SetPaused), as
// POST /api/queues/{step}/pause and /resume do.
func (d *dbBackend) SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return worker.Pause{}, err
	}
	p, err := worker.SetPaused(ctx, pool, step, paused, d.actor)
	name := "resume"
	if paused {
		name = "pause"
	}
	d.record(ctx, actionOf(name, step, http.StatusOK), err)
	return p, err
}

// Requeue runs one tts_requeue pass over at most limit compensating tasks
// (compensation.Requeue), as POST /api/compensations/requeue does.
func (d *dbBackend) Requeue(ctx context.Context, limit int) (requeued, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return requeued{}, err
	}
	pub, err := d.publisher(ctx)
	if err != nil {
		return requeued{}, err
	}
	tasks, err := compensation.Requeue(ctx, pool, pub, compensation.Options{Limit: limit})
	if err != nil && tasks != nil {
		d.warnf("publish deferred to the outbox sweep: %v", err)
		err = nil
	}
	d.record(ctx, actionOf("requeue", "", http.StatusOK), err)
	if err != nil {
		return requeued{}, err
	}
	return requeuedOf(tasks), nil
}

// Timeline reads every event of the task (view.Timeline).
func (d *dbBackend) Timeline(ctx context.Context, id uuid.UUID) (taskTimeline, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return taskTimeline{}, err
	}
	evs, err := view.Timeline(ctx, pool, id)
	return taskTimeline{TaskID: id, Events: evs}, err
}

// Compensations reads the compensating tasks (view.Compensations).
func (d *dbBackend) Compensations(ctx context.Context, limit int) ([]view.Compensation, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	out, err := view.Compensations(ctx, pool, limit)
	if out == nil && err == nil {
		out = []view.Compensation{}
	}
	return out, err
}

// Audit reads one page of the audit log (audit.List).
func (d *dbBackend) Audit(ctx context.Context, f auditFilter) (audit.Page, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return audit.Page{}, err
	}
	p, err := audit.List(ctx, pool, f.Filter)
	if errors.Is(err, audit.ErrBadCursor) {
		return p, usageError(err)
	}
	return p, err
}

// Workers reads the worker processes (worker.Processes).
func (d *dbBackend) Workers(ctx context.Context) (workerList, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return workerList{}, err
	}
	procs, err := worker.Processes(ctx, pool)
	return workersOf(procs), err
}
