package tasks

import (
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
)

// Progress counts a task's units of work: the parts of its steps (a step
// not fanned out yet counts as one).
type Progress struct {
	Total   int `json:"total"`
	Done    int `json:"done"`
	Pending int `json:"pending"`
	Failed  int `json:"failed"`
}

// Metrics are the realtime metrics of one task: mean wait, throughput and
// the estimated completion.
type Metrics struct {
	// AvgWaitTime is the mean over the task's parts of the seconds each
	// part's messages waited in their work queues: per attempt, from when
	// its message was ready there (published; a retry: back from its delay
	// tier) to its claim (the attempts' queueWaitMs), summed per part. 0
	// when no part's wait was measured (WaitedParts 0).
	AvgWaitTime float64 `json:"avgWaitTime"`
	// WaitedParts counts the parts AvgWaitTime is the mean of.
	WaitedParts int `json:"waitedParts"`
	// Throughput is parts done per minute since the task was created.
	Throughput float64 `json:"throughput"`
	// EstimatedCompletion extrapolates Throughput over the pending parts.
	EstimatedCompletion *time.Time `json:"estimatedCompletion"`
}

// Realtime is GET /api/tasks/{id}/realtime-status.
type Realtime struct {
	TaskID       uuid.UUID `json:"taskId"`
	Status       string    `json:"status"`
	Progress     Progress  `json:"progress"`
	Metrics      Metrics   `json:"metrics"`
	LastActivity time.Time `json:"lastActivity"`
	// TaskMetrics are seed 003's task_processing_metrics of the task:
	// submitted, first output, completed, and the parts done of the total
	// (as progress counts them).
	TaskMetrics TaskMetrics `json:"taskMetrics"`
	// PlayableSeconds is how much of the task's growing stream plays from
	// its start (0 without one: a short task, or none made yet).
	PlayableSeconds float64 `json:"playableSeconds"`
}

// TaskMetrics is the task's row of task_metrics with its parts.
type TaskMetrics struct {
	view.TaskMetrics
	PartsDone  int `json:"partsDone"`
	PartsTotal int `json:"partsTotal"`
}

func (s Room) realtimeStatus(w http.ResponseWriter, r *http.Request) {
	d, ok := s.requestedDetail(w, r)
	if !ok {
		return
	}
	tm, err := view.LoadTaskMetrics(r.Context(), s.Pool, d.TaskID)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	rs := computeRealtime(d, time.Now())
	rs.TaskMetrics = TaskMetrics{TaskMetrics: tm, PartsDone: rs.Progress.Done, PartsTotal: rs.Progress.Total}
	if d.Stream != nil {
		rs.PlayableSeconds = d.Stream.PlayableSeconds
	}
	route.JSON(w, http.StatusOK, rs)
}

// computeRealtime derives the realtime status from a task's detail.
func computeRealtime(d *view.Task, now time.Time) Realtime {
	rs := Realtime{TaskID: d.TaskID, Status: d.Status, LastActivity: d.UpdatedAt}
	for _, sv := range d.Steps {
		for _, p := range sv.Parts {
			for _, a := range p.Attempts {
				rs.LastActivity = later(rs.LastActivity, a.StartedAt)
				if a.FinishedAt != nil {
					rs.LastActivity = later(rs.LastActivity, *a.FinishedAt)
				}
			}
		}
	}
	for _, sv := range d.Steps {
		if sv.Status == view.Skipped {
			continue // no work: the task's plan leaves it out
		}
		rs.Progress.Total += max(1, len(sv.Parts))
		for _, p := range sv.Parts {
			switch p.Status {
			case "succeeded":
				rs.Progress.Done++
			case "failed", "parked":
				rs.Progress.Failed++
			}
		}
	}
	if d.Status == view.Done {
		rs.Progress.Done, rs.Progress.Failed = rs.Progress.Total, 0
	}
	rs.Progress.Pending = max(0, rs.Progress.Total-rs.Progress.Done-rs.Progress.Failed)
	rs.Metrics.AvgWaitTime, rs.Metrics.WaitedParts = partWait(d.Steps)
	end := now
	if view.Ended(d.Status) {
		end = rs.LastActivity
	}
	if minutes := end.Sub(d.CreatedAt).Minutes(); minutes > 0 {
		rs.Metrics.Throughput = float64(rs.Progress.Done) / minutes
	}
	if !view.Ended(d.Status) && rs.Metrics.Throughput > 0 {
		eta := now.Add(time.Duration(float64(rs.Progress.Pending) / rs.Metrics.Throughput * float64(time.Minute)))
		eta = eta.UTC().Truncate(time.Second)
		rs.Metrics.EstimatedCompletion = &eta
	}
	return rs
}

// partWait is the mean over the parts of steps of the queue waits of each
// part's attempts (summed per part), in seconds, and how many parts had a
// measured wait.
func partWait(steps []view.Step) (float64, int) {
	var total float64
	n := 0
	for _, sv := range steps {
		for _, p := range sv.Parts {
			var ms int64
			measured := false
			for _, a := range p.Attempts {
				if a.QueueWaitMS != nil {
					ms += *a.QueueWaitMS
					measured = true
				}
			}
			if measured {
				total += float64(ms) / 1000
				n++
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return total / float64(n), n
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
