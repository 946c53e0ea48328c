package step

import (
	"sync"

	"github.com/dubflow/dubflow/pkg/internal/relay"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/prometheus/client_golang/prometheus"
)

// LeaseSuffix ends the step label (store.WithStep) of a step's lease
// extensions: "asr:lease".
const LeaseSuffix = ":lease"

// Metrics are the runtime's Prometheus metrics.
type Metrics struct {
	messages *prometheus.CounterVec
	duration *prometheus.HistogramVec
	wait     *prometheus.HistogramVec
	projects projectLabels
	outbox   *relay.Metrics
}

// WaitBuckets are the bounds of dubflow_step_wait_seconds: fine below a
// second, and around seed 003's target of 30 s (the alert's threshold).
var WaitBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120, 300, 600, 1800}

// WaitProjectLabels is how many projects get a project label of their own
// on dubflow_step_wait_seconds in one process: the first ones it sees;
// later ones share "other", tasks without a project are "none". A
// project's series cannot move to "other" once exported (its counts would
// go backwards), so the set is fixed by arrival, not re-ranked: with the
// five steps and the buckets, a process exports at most
// (WaitProjectLabels+2) × 22 series of it.
const WaitProjectLabels = ops.ProjectLabels

// NewMetrics creates the runtime's metrics, its outbox's among them, and
// registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		messages: ops.Counters(reg, "dubflow_step_messages_total",
			"Messages handled by the step runtime, by step and outcome (succeeded, retried, dead_lettered, parked, duplicate, waiting, held, rejected, handed_back, lease_lost, refused (the task was cancelled or failed while the step ran, or refused its outcome), ended (a message of a task cancelled or failed, dropped), claim_lost, claim_error, commit_error, unavailable: a service the step needs — the object store, the database — was down and the message was handed back without spending a retry).",
			"step", "outcome"),
		duration: ops.Histograms(reg, "dubflow_step_duration_seconds", "Time a step's handler ran, by step and outcome.",
			[]float64{.01, .05, .1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800}, "step", "outcome"),
		wait: ops.Histograms(reg, "dubflow_step_wait_seconds",
			"Time a step's message waited in its work queue, from when it was ready there (published; for a retry, back from its delay tier) to the claim of its attempt, by step and project (the first 20 a process sees; then other; none without a project). Not counted: waits in a delay tier, or in a task's window of held parts.",
			WaitBuckets, "step", "project"),
		outbox: relay.NewMetrics(reg),
	}
}

// waited observes the queue wait of a claimed attempt.
func (m *Metrics) waited(step, project string, seconds float64) {
	m.wait.WithLabelValues(step, m.projects.label(project)).Observe(seconds)
}

// projectLabels bounds the project label: the first WaitProjectLabels
// projects keep their name, the others are "other".
type projectLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (p *projectLabels) label(project string) string {
	if project == "" {
		return "none"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[project] {
		return project
	}
	if len(p.seen) >= WaitProjectLabels {
		return "other"
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[project] = true
	return project
}

func (m *Metrics) outcome(step, outcome string) {
	m.messages.WithLabelValues(step, outcome).Inc()
}
