package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A task's review in both modes: through the console's
// /api/tasks/{id}/review routes, or with pkg/dub's operations and the
// audit rows the console writes for them (review, approve).

// Review reads GET /api/tasks/{id}/review.
func (c *consoleBackend) Review(ctx context.Context, id uuid.UUID) (*view.TaskReview, error) {
	var r view.TaskReview
	return &r, c.get(ctx, taskPath(id, "/review"), &r)
}

// EditReview sends POST /api/tasks/{id}/review/edit.
func (c *consoleBackend) EditReview(ctx context.Context, id uuid.UUID, e dub.LineEdit) (*dub.Edited, error) {
	var ed dub.Edited
	return &ed, c.post(ctx, taskPath(id, "/review/edit"), e, &ed)
}

// Approve sends POST /api/tasks/{id}/review/approve.
func (c *consoleBackend) Approve(ctx context.Context, id uuid.UUID) (*dub.Approved, error) {
	var a dub.Approved
	return &a, c.post(ctx, taskPath(id, "/review/approve"), struct{}{}, &a)
}

// ExportLines reads GET /api/tasks/{id}/review/export.
func (c *consoleBackend) ExportLines(ctx context.Context, id uuid.UUID, f subtitle.Format, text string) ([]byte, error) {
	q := url.Values{"format": {string(f)}, "text": {text}}
	path := taskPath(id, "/review/export?"+query(q))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("console GET %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("console %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, answerError(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("console GET %s: %w", path, err)
	}
	return b, nil
}

// ImportLines sends POST /api/tasks/{id}/review/import.
func (c *consoleBackend) ImportLines(ctx context.Context, id uuid.UUID, text string, file []byte) (*dub.Edited, error) {
	var ed dub.Edited
	body := map[string]string{"text": text, "subtitles": string(file)}
	return &ed, c.post(ctx, taskPath(id, "/review/import"), body, &ed)
}

// ExportLines writes the lines as a subtitle file (dub.ExportLines).
func (d *dbBackend) ExportLines(ctx context.Context, id uuid.UUID, f subtitle.Format, text string) ([]byte, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return dub.ExportLines(ctx, pool, id, f, text)
}

// ImportLines replaces the lines with a subtitle file's (dub.ImportLines)
// as the actor and records the console's audit row.
func (d *dbBackend) ImportLines(ctx context.Context, id uuid.UUID, text string, file []byte) (*dub.Edited, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	ed, err := dub.ImportLines(ctx, pool, id, d.actor, text, file)
	d.recordEdit(ctx, id, ed, err)
	return ed, reviewRefusal(err)
}

// Review reads the task's review (view.ReviewOf).
func (d *dbBackend) Review(ctx context.Context, id uuid.UUID) (*view.TaskReview, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.ReviewOf(ctx, pool, id)
}

// EditReview edits a line (dub.EditReview) as the actor and records the
// console's audit row, the edit as its detail.
func (d *dbBackend) EditReview(ctx context.Context, id uuid.UUID, e dub.LineEdit) (*dub.Edited, error) {
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
func (d *dbBackend) Approve(ctx context.Context, id uuid.UUID) (*dub.Approved, error) {
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
		return usageError(err)
	}
	return err
}

// recordEdit writes the console's audit row of a review edit: action
// review, the edit's lines before and after as its detail.
func (d *dbBackend) recordEdit(ctx context.Context, id uuid.UUID, ed *dub.Edited, err error) {
	a := actionOf("review", id.String(), http.StatusOK)
	if err == nil {
		a.detail = map[string]any{"action": ed.Edit.Action, "stage": ed.Edit.Stage, "line": ed.Edit.Line,
			"before": ed.Edit.Before, "after": ed.Edit.After}
	}
	d.record(ctx, a, err)
}
