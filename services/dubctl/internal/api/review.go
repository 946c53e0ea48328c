package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// A task's review in both modes: through the console's
// /api/tasks/{id}/review routes, or with pkg/dub's operations and the
// audit rows the console writes for them (review, approve).

// Review reads GET /api/tasks/{id}/review.
func (c *Client) Review(ctx context.Context, id uuid.UUID) (*view.TaskReview, error) {
	var r view.TaskReview
	return &r, c.Get(ctx, TaskPath(id, "/review"), &r)
}

// EditReview sends POST /api/tasks/{id}/review/edit.
func (c *Client) EditReview(ctx context.Context, id uuid.UUID, e dub.LineEdit) (*dub.Edited, error) {
	var ed dub.Edited
	return &ed, c.post(ctx, TaskPath(id, "/review/edit"), e, &ed)
}

// Approve sends POST /api/tasks/{id}/review/approve.
func (c *Client) Approve(ctx context.Context, id uuid.UUID) (*dub.Approved, error) {
	var a dub.Approved
	return &a, c.post(ctx, TaskPath(id, "/review/approve"), struct{}{}, &a)
}

// ExportLines reads GET /api/tasks/{id}/review/export.
func (c *Client) ExportLines(ctx context.Context, id uuid.UUID, f subtitle.Format, text string) ([]byte, error) {
	q := url.Values{"format": {string(f)}, "text": {text}}
	path := TaskPath(id, "/review/export?"+query(q))
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
func (c *Client) ImportLines(ctx context.Context, id uuid.UUID, text string, file []byte) (*dub.Edited, error) {
	var ed dub.Edited
	body := map[string]string{"text": text, "subtitles": string(file)}
	return &ed, c.post(ctx, TaskPath(id, "/review/import"), body, &ed)
}
