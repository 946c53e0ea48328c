package main

import (
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the dispatcher's own Prometheus metrics.
type metrics struct {
	assigned   prometheus.Counter
	expired    prometheus.Counter
	scans      prometheus.Counter
	scanErrors prometheus.Counter
	scanTime   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		assigned: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_assignments_total",
			Help: "Waiting entries assigned to an agent by this process."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_expired_total",
			Help: "Waiting entries expired by this process after their last attempt."}),
		scans: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_scans_total",
			Help: "Periodic scans run."}),
		scanErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_scan_errors_total",
			Help: "Periodic scans that met an error."}),
		scanTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dispatcher_scan_duration_seconds",
			Help: "Duration of a periodic scan.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
	}
	reg.MustRegister(m.assigned, m.expired, m.scans, m.scanErrors, m.scanTime)
	return m
}

// outcome counts what a Process call did.
func (m *metrics) outcome(o queue.Outcome) {
	m.assigned.Add(float64(len(o.Assigned)))
	if o.Expired {
		m.expired.Inc()
	}
}
