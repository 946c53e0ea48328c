package database

import (
	"context"
	"errors"
	"net/http"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ExportLines writes the lines as a subtitle file (dub.ExportLines).
func (d *Backend) ExportLines(ctx context.Context, id uuid.UUID, f subtitle.Format, text string) ([]byte, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return dub.ExportLines(ctx, pool, id, f, text)
}

// ImportLines replaces the lines with a subtitle file's (dub.ImportLines)
// as the actor and records the console's audit row.
func (d *Backend) ImportLines(ctx context.Context, id uuid.UUID, text string, file []byte) (*dub.Edited, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	ed, err := dub.ImportLines(ctx, pool, id, d.actor, text, file)
	d.recordEdit(ctx, id, ed, err)
	return ed, reviewRefusal(err)
}

// Review reads the task's review (view.ReviewOf).
func (d *Backend) Review(ctx context.Context, id uuid.UUID) (*view.TaskReview, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.ReviewOf(ctx, pool, id)
}

// EditReview edits a line (dub.EditReview) as the actor and records the
// console's audit row, the edit as its detail.
func (d *Backend) EditReview(ctx context.Context, id uuid.UUID, e dub.LineEdit) (*dub.Edited, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	ed, err := dub.EditReview(ctx, pool, id, d.actor, e)
	d.recordEdit(ctx, id, ed, err)
	return ed, reviewRefusal(err)
}

// Approve approves the lines (dub.Approve) as the actor, records the
// console's audit row and publishes what the approval committed.
func (d *Backend) Approve(ctx context.Context, id uuid.UUID) (*dub.Approved, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := d.publisher(ctx); err != nil {
		return nil, err
	}
	batch, err := setting.IntOf(ctx, pool, setting.TranslateBatchSize, d.cfg.TranslateBatchSize)
	if err != nil {
		return nil, err
	}
	var ap *dub.Approved
	err = d.commit(ctx, func(tx pgx.Tx) ([]int64, error) {
		var err error
		if ap, err = dub.Approve(ctx, tx, id, d.actor, batch); err != nil {
			return nil, err
		}
		return ap.Outbox, nil
	})
	a := actionOf("approve", id.String(), http.StatusAccepted)
	if err == nil {
		a.detail = map[string]any{"stage": ap.Stage, "lines": ap.Lines}
	}
	d.record(ctx, a, err)
	if err != nil {
		return nil, reviewRefusal(err)
	}
	return ap, nil
}

// reviewRefusal makes a review's refusal of the request a usage error
// (exit 2), as the console's 400 is in console mode.
func reviewRefusal(err error) error {
	if errors.Is(err, dub.ErrNoSegment) || errors.Is(err, dub.ErrInvalidText) || errors.Is(err, dub.ErrInvalidLine) {
		return cli.UsageError(err)
	}
	return err
}

// recordEdit writes the console's audit row of a review edit: action
// review, the edit's lines before and after as its detail.
func (d *Backend) recordEdit(ctx context.Context, id uuid.UUID, ed *dub.Edited, err error) {
	a := actionOf("review", id.String(), http.StatusOK)
	if err == nil {
		a.detail = map[string]any{"action": ed.Edit.Action, "stage": ed.Edit.Stage, "line": ed.Edit.Line,
			"before": ed.Edit.Before, "after": ed.Edit.After}
	}
	d.record(ctx, a, err)
}
