package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
)

// The operators' actions and reads through the console beyond submit,
// redub and replay (console.go): each is the console's route for it.

// Cancel sends POST /api/tasks/{id}/cancel.
func (c *consoleBackend) Cancel(ctx context.Context, id uuid.UUID, reason string) (view.Summary, error) {
	var s view.Summary
	return s, c.post(ctx, taskPath(id, "/cancel"), map[string]string{"reason": reason}, &s)
}

// Retry sends POST /api/tasks/{id}/retry, with the voice to retry with
// when one is given.
func (c *consoleBackend) Retry(ctx context.Context, id uuid.UUID, speaker string) (retried, error) {
	var r retried
	if speaker == "" {
		return r, c.do(ctx, http.MethodPost, taskPath(id, "/retry"), "", nil, &r)
	}
	return r, c.post(ctx, taskPath(id, "/retry"), map[string]string{"speaker": speaker}, &r)
}

// Bulk sends POST /api/dead-letters/replay or /purge.
func (c *consoleBackend) Bulk(ctx context.Context, purge bool, b dlq.BulkRequest) (dlq.BulkResult, error) {
	path := "/api/dead-letters/replay"
	if purge {
		path = "/api/dead-letters/purge"
	}
	var out dlq.BulkResult
	return out, c.post(ctx, path, b, &out)
}

// SetPaused sends POST /api/queues/{step}/pause or /resume.
func (c *consoleBackend) SetPaused(ctx context.Context, step string, paused bool) (worker.Pause, error) {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	var p worker.Pause
	return p, c.do(ctx, http.MethodPost, "/api/queues/"+url.PathEscape(step)+"/"+verb, "", nil, &p)
}

// Requeue sends POST /api/compensations/requeue.
func (c *consoleBackend) Requeue(ctx context.Context, limit int) (requeued, error) {
	var r requeued
	return r, c.post(ctx, "/api/compensations/requeue", map[string]int{"limit": limit}, &r)
}

// Timeline reads GET /api/tasks/{id}/timeline.
func (c *consoleBackend) Timeline(ctx context.Context, id uuid.UUID) (taskTimeline, error) {
	var t taskTimeline
	return t, c.get(ctx, taskPath(id, "/timeline"), &t)
}

// Compensations reads GET /api/compensations.
func (c *consoleBackend) Compensations(ctx context.Context, limit int) ([]view.Compensation, error) {
	var out struct {
		Tasks []view.Compensation `json:"tasks"`
	}
	err := c.get(ctx, fmt.Sprintf("/api/compensations?limit=%d", limit), &out)
	if out.Tasks == nil && err == nil {
		out.Tasks = []view.Compensation{}
	}
	return out.Tasks, err
}

// Audit reads GET /api/audit.
func (c *consoleBackend) Audit(ctx context.Context, f auditFilter) (audit.Page, error) {
	q := url.Values{"action": {f.Action}, "actor": {f.Actor}, "target": {f.Target}, "since": {f.since},
		"until": {f.until}, "cursor": {f.Cursor}, "limit": {fmt.Sprint(f.Limit)}}
	var p audit.Page
	return p, c.get(ctx, "/api/audit?"+query(q), &p)
}

// Workers reads GET /api/workers.
func (c *consoleBackend) Workers(ctx context.Context) (workerList, error) {
	var w workerList
	err := c.get(ctx, "/api/workers", &w)
	return workersOf(w.Workers), err
}
