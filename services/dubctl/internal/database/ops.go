package database

import (
	"context"
	"errors"
	"net/http"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The operators' actions and reads in database mode beyond submit, redub
// and replay (database.go): each calls the package the console's route
// calls, and writes the same audit row (audit.go).

// Cancel ends a task that is not finished (task.Cancel, a parent's
// children with it) and answers its summary, as POST
// /api/tasks/{id}/cancel does.
func (d *Backend) Cancel(ctx context.Context, id uuid.UUID, reason string) (view.Summary, error) {
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
	sum, err := view.LoadSummary(ctx, pool, id)
	if err != nil {
		return sum, err
	}
	// Cancel means stop: the growing stream ends where it is.
	objects, err := d.blob(ctx)
	if err == nil {
		err = stream.End(ctx, pool, objects, id, sum.TargetLanguage)
	}
	if err != nil {
		d.warnf("end the stream of %s: %v", id, err)
	}
	return sum, nil
}

// Bulk replays or purges the dead letters b selects (dlq.BulkReplay,
// dlq.BulkPurge), as POST /api/dead-letters/replay and /purge do.
func (d *Backend) Bulk(ctx context.Context, purge bool, b dlq.BulkRequest) (dlq.BulkResult, error) {
	m, err := b.Match(cli.Now())
	if err != nil {
		return dlq.BulkResult{}, cli.UsageError(err)
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

// Requeue runs one tts_requeue pass over at most limit compensating tasks
// (compensation.Requeue), as POST /api/compensations/requeue does.
func (d *Backend) Requeue(ctx context.Context, limit int) (shape.Requeued, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return shape.Requeued{}, err
	}
	pub, err := d.publisher(ctx)
	if err != nil {
		return shape.Requeued{}, err
	}
	tasks, err := compensation.Requeue(ctx, pool, pub, compensation.Options{Limit: limit})
	if err != nil && tasks != nil {
		d.warnf("publish deferred to the outbox sweep: %v", err)
		err = nil
	}
	d.record(ctx, actionOf("requeue", "", http.StatusOK), err)
	if err != nil {
		return shape.Requeued{}, err
	}
	return requeuedOf(tasks), nil
}

// Timeline reads every event of the task (view.Timeline).
func (d *Backend) Timeline(ctx context.Context, id uuid.UUID) ([]view.Event, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.Timeline(ctx, pool, id)
}

// Compensations reads the compensating tasks (view.Compensations).
func (d *Backend) Compensations(ctx context.Context, limit int) ([]view.Compensation, error) {
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
func (d *Backend) Audit(ctx context.Context, f audit.Filter, _ shape.Range) (audit.Page, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return audit.Page{}, err
	}
	p, err := audit.List(ctx, pool, f)
	if errors.Is(err, audit.ErrBadCursor) {
		return p, cli.UsageError(err)
	}
	return p, err
}

// requeuedOf is what compensation.Requeue re-drove.
func requeuedOf(tasks []compensation.Task) shape.Requeued {
	out := shape.Requeued{Requeued: make([]shape.RequeuedTask, 0, len(tasks))}
	for _, t := range tasks {
		out.Requeued = append(out.Requeued, shape.RequeuedTask{TaskID: t.TaskID, Status: t.Status, MissingSegments: t.Missing,
			Attempt: t.Attempt})
	}
	return out
}
