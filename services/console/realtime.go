package main

import (
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
)

// progress counts a task's units of work: the parts of its steps (a step
// not fanned out yet counts as one).
type progress struct {
	Total   int `json:"total"`
	Done    int `json:"done"`
	Pending int `json:"pending"`
	Failed  int `json:"failed"`
}

// rtMetrics are the realtime metrics of one task: mean wait, throughput and
// the estimated completion.
type rtMetrics struct {
	// AvgWaitTime is the mean seconds between a step becoming ready (its
	// predecessor finished, or the task created) and its first attempt.
	AvgWaitTime float64 `json:"avgWaitTime"`
	// Throughput is parts done per minute since the task was created.
	Throughput float64 `json:"throughput"`
	// EstimatedCompletion extrapolates Throughput over the pending parts.
	EstimatedCompletion *time.Time `json:"estimatedCompletion"`
}

// realtimeStatus is GET /api/tasks/{id}/realtime-status.
type realtimeStatus struct {
	TaskID       uuid.UUID `json:"taskId"`
	Status       string    `json:"status"`
	Progress     progress  `json:"progress"`
	Metrics      rtMetrics `json:"metrics"`
	LastActivity time.Time `json:"lastActivity"`
}

func (s *server) realtimeStatus(w http.ResponseWriter, r *http.Request) {
	d, ok := s.requestedDetail(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, computeRealtime(d, time.Now()))
}

// computeRealtime derives the realtime status from a task's detail.
func computeRealtime(d *taskDetail, now time.Time) realtimeStatus {
	rs := realtimeStatus{TaskID: d.TaskID, Status: d.Status, LastActivity: d.UpdatedAt}
	for _, a := range d.attempts {
		rs.LastActivity = *latest(&rs.LastActivity, &a.StartedAt)
		rs.LastActivity = *latest(&rs.LastActivity, a.FinishedAt)
	}
	ready := d.CreatedAt
	var waits []float64
	for _, sv := range d.Steps {
		parts := max(1, len(sv.Parts))
		rs.Progress.Total += parts
		for _, p := range sv.Parts {
			switch p.Status {
			case "succeeded":
				rs.Progress.Done++
			case "failed", "parked":
				rs.Progress.Failed++
			}
		}
		if sv.StartedAt != nil {
			waits = append(waits, max(0, sv.StartedAt.Sub(ready).Seconds()))
		}
		if sv.FinishedAt != nil {
			ready = *sv.FinishedAt
		}
	}
	if d.Status == task.Done {
		rs.Progress.Done, rs.Progress.Failed = rs.Progress.Total, 0
	}
	rs.Progress.Pending = max(0, rs.Progress.Total-rs.Progress.Done-rs.Progress.Failed)
	for _, w := range waits {
		rs.Metrics.AvgWaitTime += w / float64(len(waits))
	}
	end := now
	if task.Ended(d.Status) {
		end = rs.LastActivity
	}
	if minutes := end.Sub(d.CreatedAt).Minutes(); minutes > 0 {
		rs.Metrics.Throughput = float64(rs.Progress.Done) / minutes
	}
	if !task.Ended(d.Status) && rs.Metrics.Throughput > 0 {
		eta := now.Add(time.Duration(float64(rs.Progress.Pending) / rs.Metrics.Throughput * float64(time.Minute)))
		eta = eta.UTC().Truncate(time.Second)
		rs.Metrics.EstimatedCompletion = &eta
	}
	return rs
}
