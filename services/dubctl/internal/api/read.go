package api

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
)

// Task reads GET /api/tasks/{id}.
func (c *Client) Task(ctx context.Context, id uuid.UUID) (*view.Task, error) {
	var t view.Task
	if err := c.Get(ctx, TaskPath(id, ""), &t); err != nil {
		return &t, err
	}
	if t.Stream != nil && strings.HasPrefix(t.Stream.URL, "/") {
		t.Stream.URL = strings.TrimSuffix(c.base, "/") + t.Stream.URL // the console's address of the stream
	}
	return &t, nil
}

// List reads GET /api/tasks with the search.
func (c *Client) List(ctx context.Context, f view.Filter, r shape.Range) (view.Page, error) {
	q := url.Values{"status": {f.Status}, "limit": {fmt.Sprint(f.Limit)}, "cursor": {f.Cursor},
		"includeChildren": {fmt.Sprint(f.WithChildren)}, "q": {f.Q}, "language": {f.Language}, "error": {f.Error},
		"since": {r.Since}, "until": {r.Until}}
	var p view.Page
	return p, c.Get(ctx, "/api/tasks?"+query(q), &p)
}

// query encodes q without its empty values.
func query(q url.Values) string {
	for k, v := range q {
		if len(v) == 1 && v[0] == "" {
			delete(q, k)
		}
	}
	return q.Encode()
}

// Segments reads GET /api/tasks/{id}/segments.
func (c *Client) Segments(ctx context.Context, id uuid.UUID) ([]view.Segment, error) {
	var out struct {
		Segments []view.Segment `json:"segments"`
	}
	return out.Segments, c.Get(ctx, TaskPath(id, "/segments"), &out)
}

// Versions reads GET /api/tasks/{id}/versions.
func (c *Client) Versions(ctx context.Context, id uuid.UUID) ([]view.Version, error) {
	var out struct {
		Versions []view.Version `json:"versions"`
	}
	return out.Versions, c.Get(ctx, TaskPath(id, "/versions"), &out)
}

// DeadLetters reads GET /api/dead-letters.
func (c *Client) DeadLetters(ctx context.Context, f view.DeadLetterFilter) ([]view.DeadLetter, error) {
	q := url.Values{"step": {f.Step}, "limit": {fmt.Sprint(f.Limit)}, "pending": {fmt.Sprint(f.Pending)}}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	var out struct {
		DeadLetters []view.DeadLetter `json:"deadLetters"`
	}
	return out.DeadLetters, c.Get(ctx, "/api/dead-letters?"+q.Encode(), &out)
}

// DeadLetter reads GET /api/dead-letters/{id}.
func (c *Client) DeadLetter(ctx context.Context, id int64) (*view.DeadLetter, error) {
	var d view.DeadLetter
	return &d, c.Get(ctx, fmt.Sprintf("/api/dead-letters/%d", id), &d)
}

// Timeline reads GET /api/tasks/{id}/timeline.
func (c *Client) Timeline(ctx context.Context, id uuid.UUID) ([]view.Event, error) {
	var t struct {
		Events []view.Event `json:"events"`
	}
	err := c.Get(ctx, TaskPath(id, "/timeline"), &t)
	return t.Events, err
}

// Compensations reads GET /api/compensations.
func (c *Client) Compensations(ctx context.Context, limit int) ([]view.Compensation, error) {
	var out struct {
		Tasks []view.Compensation `json:"tasks"`
	}
	err := c.Get(ctx, fmt.Sprintf("/api/compensations?limit=%d", limit), &out)
	if out.Tasks == nil && err == nil {
		out.Tasks = []view.Compensation{}
	}
	return out.Tasks, err
}

// Audit reads GET /api/audit.
func (c *Client) Audit(ctx context.Context, f audit.Filter, r shape.Range) (audit.Page, error) {
	q := url.Values{"action": {f.Action}, "actor": {f.Actor}, "target": {f.Target}, "since": {r.Since},
		"until": {r.Until}, "cursor": {f.Cursor}, "limit": {fmt.Sprint(f.Limit)}}
	var p audit.Page
	return p, c.Get(ctx, "/api/audit?"+query(q), &p)
}
