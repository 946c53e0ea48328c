package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
)

// Redub sends POST /api/tasks/{id}/redub.
func (c *Client) Redub(ctx context.Context, id uuid.UUID, n int, text string) (*dub.Redubbed, error) {
	var r dub.Redubbed
	return &r, c.post(ctx, TaskPath(id, "/redub"), map[string]any{"segment": n, "text": text}, &r)
}

// Replay sends POST /api/dead-letters/{id}/replay.
func (c *Client) Replay(ctx context.Context, id int64, force bool) (dlq.Replayed, error) {
	var r dlq.Replayed
	return r, c.post(ctx, fmt.Sprintf("/api/dead-letters/%d/replay", id), map[string]bool{"force": force}, &r)
}

// The operators' other actions through the console: each is the
// console's route for it.

// Cancel sends POST /api/tasks/{id}/cancel.
func (c *Client) Cancel(ctx context.Context, id uuid.UUID, reason string) (view.Summary, error) {
	var s view.Summary
	return s, c.post(ctx, TaskPath(id, "/cancel"), map[string]string{"reason": reason}, &s)
}

// Bulk sends POST /api/dead-letters/replay or /purge.
func (c *Client) Bulk(ctx context.Context, purge bool, b dlq.BulkRequest) (dlq.BulkResult, error) {
	path := "/api/dead-letters/replay"
	if purge {
		path = "/api/dead-letters/purge"
	}
	var out dlq.BulkResult
	return out, c.post(ctx, path, b, &out)
}

// Requeue sends POST /api/compensations/requeue.
func (c *Client) Requeue(ctx context.Context, limit int) (shape.Requeued, error) {
	var r shape.Requeued
	return r, c.post(ctx, "/api/compensations/requeue", map[string]int{"limit": limit}, &r)
}

// Retry sends POST /api/tasks/{id}/retry, with the voice to retry with
// when one is given, and reads the answer as R (pkg/retry's Retried, which
// stands too deep in the import graph for a room: main names it).
func Retry[R any](ctx context.Context, c *Client, id uuid.UUID, speaker string) (R, error) {
	var r R
	if speaker == "" {
		return r, c.do(ctx, http.MethodPost, TaskPath(id, "/retry"), "", nil, &r)
	}
	return r, c.post(ctx, TaskPath(id, "/retry"), map[string]string{"speaker": speaker}, &r)
}

// SetPaused sends POST /api/queues/{step}/pause or /resume and reads the
// answer as P (pkg/worker's Pause: main names it).
func SetPaused[P any](ctx context.Context, c *Client, step string, paused bool) (P, error) {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	var p P
	return p, c.do(ctx, http.MethodPost, "/api/queues/"+url.PathEscape(step)+"/"+verb, "", nil, &p)
}
