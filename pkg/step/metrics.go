package step

import (
	"time"

	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/prometheus/client_golang/prometheus"
)

// LeaseSuffix ends the step label (store.WithStep) of a step's lease
// extensions: "asr:lease".
const LeaseSuffix = ":lease"

// Metrics are the runtime's Prometheus metrics.
type Metrics struct {
	messages *prometheus.CounterVec
	duration *prometheus.HistogramVec
	outbox   *outbox.Metrics
}

// NewMetrics creates the runtime's metrics, its outbox's among them, and
// registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		messages: ops.Counters(reg, "dubflow_step_messages_total",
			"Messages handled by the step runtime, by step and outcome (succeeded, retried, dead_lettered, parked, duplicate, waiting, held, rejected, handed_back, lease_lost, refused (the task was cancelled or failed while the step ran, or refused its outcome), ended (a message of a task cancelled or failed, dropped), claim_lost, claim_error, commit_error, unavailable: a service the step needs — the object store, the database — was down and the message was handed back without spending a retry).",
			"step", "outcome"),
		duration: ops.Histograms(reg, "dubflow_step_duration_seconds", "Time a step's handler ran, by step and outcome.",
			[]float64{.01, .05, .1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800}, "step", "outcome"),
		outbox: outbox.NewMetrics(reg),
	}
}

func (m *Metrics) outcome(step, outcome string) {
	m.messages.WithLabelValues(step, outcome).Inc()
}

func (m *Metrics) observe(step, outcome string, d time.Duration) {
	m.messages.WithLabelValues(step, outcome).Inc()
	m.duration.WithLabelValues(step, outcome).Observe(d.Seconds())
}
