package step

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the runtime's Prometheus metrics.
type Metrics struct {
	messages  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	published *prometheus.CounterVec
	swept     prometheus.Counter
}

// NewMetrics creates the runtime's metrics and registers them on reg (nil:
// not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dubflow_step_messages_total",
			Help: "Messages handled by the step runtime, by step and outcome (succeeded, retried, dead_lettered, parked, duplicate, waiting, held, rejected, handed_back, lease_lost, claim_lost, claim_error, commit_error).",
		}, []string{"step", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dubflow_step_duration_seconds",
			Help:    "Time a step's handler ran, by step and outcome.",
			Buckets: []float64{.01, .05, .1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"step", "outcome"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dubflow_outbox_published_total",
			Help: "Outbox messages published right after their commit, by routing key.",
		}, []string{"routing_key"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dubflow_outbox_swept_total",
			Help: "Outbox messages published by the sweep (left behind by a crash or a broker outage).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.messages, m.duration, m.published, m.swept)
	}
	return m
}

func (m *Metrics) outcome(step, outcome string) {
	m.messages.WithLabelValues(step, outcome).Inc()
}

func (m *Metrics) observe(step, outcome string, d time.Duration) {
	m.messages.WithLabelValues(step, outcome).Inc()
	m.duration.WithLabelValues(step, outcome).Observe(d.Seconds())
}
