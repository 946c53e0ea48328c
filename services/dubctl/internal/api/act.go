package api

import (
	"context"
	"fmt"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
)

// Redub sends POST /api/tasks/{id}/redub.
func (c *Client) Redub(ctx context.Context, id uuid.UUID, n int, text string) (*dub.Redubbed, error) {
	var r dub.Redubbed
	return &r, c.Post(ctx, TaskPath(id, "/redub"), map[string]any{"segment": n, "text": text}, &r)
}

// Replay sends POST /api/dead-letters/{id}/replay.
func (c *Client) Replay(ctx context.Context, id int64, force bool) (dlq.Replayed, error) {
	var r dlq.Replayed
	return r, c.Post(ctx, fmt.Sprintf("/api/dead-letters/%d/replay", id), map[string]bool{"force": force}, &r)
}

// The operators' actions and reads through the console beyond submit,
// redub and replay (console.go): each is the console's route for it.

// Cancel sends POST /api/tasks/{id}/cancel.
func (c *Client) Cancel(ctx context.Context, id uuid.UUID, reason string) (view.Summary, error) {
	var s view.Summary
	return s, c.Post(ctx, TaskPath(id, "/cancel"), map[string]string{"reason": reason}, &s)
}

// Bulk sends POST /api/dead-letters/replay or /purge.
func (c *Client) Bulk(ctx context.Context, purge bool, b dlq.BulkRequest) (dlq.BulkResult, error) {
	path := "/api/dead-letters/replay"
	if purge {
		path = "/api/dead-letters/purge"
	}
	var out dlq.BulkResult
	return out, c.Post(ctx, path, b, &out)
}

// Requeue sends POST /api/compensations/requeue.
func (c *Client) Requeue(ctx context.Context, limit int) (shape.Requeued, error) {
	var r shape.Requeued
	return r, c.Post(ctx, "/api/compensations/requeue", map[string]int{"limit": limit}, &r)
}
