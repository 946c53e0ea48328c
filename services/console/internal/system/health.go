package system

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// stepService is one step's workers.
type stepService struct {
	Step      string `json:"step"`
	Queue     string `json:"queue"`
	Consumers int    `json:"consumers"`
	Busy      int    `json:"busy"`
	Ready     int    `json:"ready"`
	// Paused: an operator paused the step (POST /api/queues/{step}/pause),
	// so no consumer is what it should have.
	Paused bool `json:"paused"`
}

// services sums up the workers of the pipeline.
type services struct {
	Total           int           `json:"total"`
	Available       int           `json:"available"`
	UtilizationRate float64       `json:"utilizationRate"`
	Steps           []stepService `json:"steps"`
}

// performance is the last hour of step attempts.
type performance struct {
	Throughput      float64 `json:"throughput"`
	AvgResponseTime float64 `json:"avgResponseTime"`
	ErrorRate       float64 `json:"errorRate"`
	Finished        int     `json:"finished"`
	Failed          int     `json:"failed"`
	WindowSeconds   int     `json:"windowSeconds"`
}

// HealthReport is GET /api/system/health.
type HealthReport struct {
	Status      string          `json:"status"`
	Reasons     []string        `json:"reasons"`
	CheckedAt   time.Time       `json:"checkedAt"`
	Services    services        `json:"services"`
	Queues      []inspect.State `json:"queues"`
	Performance performance     `json:"performance"`
	// Projects are seed 003's task metrics averaged per project over the
	// tasks created in the last hour (at most healthProjects, the busiest
	// first): the mean queue wait of a part, the first-output delay and the
	// completion time.
	Projects []view.ProjectMetrics `json:"projects"`
	// StuckTasks are the queued or running tasks with no progress for
	// monitoring.stuck_task_threshold (seed 003's stuck-task alert).
	StuckTasks view.Stuck `json:"stuckTasks"`
	// Review are the tasks waiting for a person's edits (at most
	// healthReviews, the longest waiting first): shown, never a reason.
	Review       view.ReviewWaits  `json:"review"`
	Dependencies map[string]string `json:"dependencies"`
}

// Thresholds of a degraded system.
const (
	healthWindow      = time.Hour
	degradedErrorRate = 0.2
	// healthProjects bounds the projects the health report averages.
	healthProjects = 50
	// healthReviews bounds the tasks in review the health report lists.
	healthReviews = 20
)

func (s Room) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	route.JSON(w, http.StatusOK, s.checkHealth(ctx))
}

// checkHealth builds the report: dependencies, queues, workers per step,
// the last hour's performance, and the verdict with its reasons.
func (s Room) checkHealth(ctx context.Context) HealthReport {
	h := HealthReport{Status: "healthy", Reasons: []string{}, CheckedAt: time.Now().UTC(),
		Dependencies: map[string]string{"postgres": "ok", "rabbitmq": "ok", "objectStore": "ok"}}
	if err := s.Pool.Ping(ctx); err != nil {
		h.Dependencies["postgres"] = err.Error()
	}
	if err := s.Objects.Ping(ctx); err != nil {
		h.Dependencies["objectStore"] = err.Error()
	}
	h.Queues = inspect.Watched()
	names := make([]string, len(h.Queues))
	for i, q := range h.Queues {
		names[i] = q.Name
	}
	states, err := s.Queues.Inspect(ctx, names)
	if err != nil {
		h.Dependencies["rabbitmq"] = err.Error()
	}
	for i := range h.Queues {
		if st, ok := states[h.Queues[i].Name]; ok {
			h.Queues[i].Ready, h.Queues[i].Consumers, h.Queues[i].Missing = st.Ready, st.Consumers, st.Missing
		}
	}
	busy, perf, err := s.stepLoad(ctx)
	if err != nil && h.Dependencies["postgres"] == "ok" {
		h.Dependencies["postgres"] = err.Error()
	}
	h.Performance = perf
	if h.Projects, err = view.ProjectAverages(ctx, s.Pool, h.CheckedAt.Add(-healthWindow), healthProjects); err != nil {
		h.Projects = []view.ProjectMetrics{}
		if h.Dependencies["postgres"] == "ok" {
			h.Dependencies["postgres"] = err.Error()
		}
	}
	s.readTaskWaits(ctx, &h)
	deriveUnacknowledged(h.Queues, busy)
	h.Services = servicesOf(h.Queues, busy)
	if pauses, err := s.Fleet.Registry.pauses(ctx); err == nil {
		for i, st := range h.Services.Steps {
			h.Services.Steps[i].Paused = pauses[st.Step].Paused
		}
	} else if h.Dependencies["postgres"] == "ok" {
		h.Dependencies["postgres"] = err.Error()
	}
	h.judge()
	return h
}

// deriveUnacknowledged fills in the unacknowledged messages of the work
// queues (busy: running attempts with a live lease, per step) and of the
// delay queues (none: nothing consumes them).
func deriveUnacknowledged(queues []inspect.State, busy map[string]int) {
	for i, q := range queues {
		switch q.Kind {
		case "work":
			n := busy[wire.StepOfQueue(q.Name)]
			queues[i].Unacknowledged = &n
		case "delay":
			n := 0
			queues[i].Unacknowledged = &n
		}
	}
}

// servicesOf counts the steps with consumers and how busy they are.
func servicesOf(queues []inspect.State, busy map[string]int) services {
	sv := services{Steps: []stepService{}}
	consumers, running := 0, 0
	for _, q := range queues {
		if q.Kind != "work" {
			continue
		}
		name := wire.StepOfQueue(q.Name)
		st := stepService{Step: name, Queue: q.Name, Consumers: q.Consumers, Busy: busy[name], Ready: q.Ready}
		sv.Steps = append(sv.Steps, st)
		sv.Total++
		if q.Consumers > 0 {
			sv.Available++
		}
		consumers += q.Consumers
		running += min(st.Busy, q.Consumers)
	}
	if consumers > 0 {
		sv.UtilizationRate = float64(running) / float64(consumers)
	}
	return sv
}

// judge sets the verdict: unhealthy when a dependency is down, degraded
// when a step has no workers, dead letters wait, or many attempts fail.
func (h *HealthReport) judge() {
	for _, name := range []string{"postgres", "rabbitmq", "objectStore"} {
		if v := h.Dependencies[name]; v != "ok" {
			h.Status = "unhealthy"
			h.Reasons = append(h.Reasons, name+": "+v)
		}
	}
	for _, st := range h.Services.Steps {
		if st.Consumers == 0 && !st.Paused {
			h.Reasons = append(h.Reasons, fmt.Sprintf("no workers consume %s (%d messages waiting)", st.Queue, st.Ready))
		}
	}
	for _, q := range h.Queues {
		switch {
		case q.Missing:
			h.Reasons = append(h.Reasons, "queue "+q.Name+" does not exist")
		case q.Kind == "dlq" && q.Ready > 0 && q.Consumers == 0:
			h.Reasons = append(h.Reasons, fmt.Sprintf("%d dead letters wait in %s with no dlq_recorder", q.Ready, q.Name))
		}
	}
	if st := h.StuckTasks; st.Count > 0 {
		h.Reasons = append(h.Reasons, fmt.Sprintf("%d queued or running task(s) made no progress for %d s or more (monitoring.stuck_task_threshold)",
			st.Count, st.ThresholdSeconds))
	}
	if h.Performance.Finished >= 10 && h.Performance.ErrorRate > degradedErrorRate {
		h.Reasons = append(h.Reasons, fmt.Sprintf("%.0f%% of step attempts failed in the last hour", 100*h.Performance.ErrorRate))
	}
	if h.Status == "healthy" && len(h.Reasons) > 0 {
		h.Status = "degraded"
	}
}

// stepLoad reads the attempts running now per step and the last hour's
// finished attempts (the read model's StepLoad).
func (s Room) stepLoad(ctx context.Context) (map[string]int, performance, error) {
	perf := performance{WindowSeconds: int(healthWindow / time.Second)}
	load, err := view.StepLoad(ctx, s.Pool, wire.Pipeline, healthWindow)
	if err != nil {
		return map[string]int{}, perf, err
	}
	perf.Finished, perf.Failed = load.Finished, load.Failed
	if load.AvgMS != nil {
		perf.AvgResponseTime = *load.AvgMS
	}
	perf.Throughput = float64(perf.Finished) / healthWindow.Minutes()
	if perf.Finished > 0 {
		perf.ErrorRate = float64(perf.Failed) / float64(perf.Finished)
	}
	return load.Running, perf, nil
}

// readTaskWaits reads the tasks that wait: stuck ones (no progress for
// monitoring.stuck_task_threshold) and those waiting for a person's review.
func (s Room) readTaskWaits(ctx context.Context, h *HealthReport) {
	var err error
	threshold := s.StuckAfter()
	if h.StuckTasks, err = view.StuckTasks(ctx, s.Pool, threshold); err != nil && h.Dependencies["postgres"] == "ok" {
		h.Dependencies["postgres"] = err.Error()
	}
	if h.Review, err = view.InReview(ctx, s.Pool, healthReviews); err != nil && h.Dependencies["postgres"] == "ok" {
		h.Dependencies["postgres"] = err.Error()
	}
}
