package main

import (
	"context"
	"time"

	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the dispatcher's own Prometheus metrics.
type metrics struct {
	assigned prometheus.Counter
	expired  prometheus.Counter
	// reservationsExpired counts unconfirmed assignments given back.
	reservationsExpired prometheus.Counter
	scans               prometheus.Counter
	scanErrors          prometheus.Counter
	scanTime            prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		assigned: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_assignments_total",
			Help: "Waiting entries assigned to an agent by this process."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_expired_total",
			Help: "Waiting entries expired by this process after their last attempt."}),
		reservationsExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_reservations_expired_total",
			Help: "Unconfirmed assignments expired by this process: the entry waits again, the agent's unit is back."}),
		scans: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_scans_total",
			Help: "Periodic scans run."}),
		scanErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "dispatcher_scan_errors_total",
			Help: "Periodic scans that met an error."}),
		scanTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dispatcher_scan_duration_seconds",
			Help: "Duration of a periodic scan.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
	}
	reg.MustRegister(m.assigned, m.expired, m.reservationsExpired, m.scans, m.scanErrors, m.scanTime)
	return m
}

// outcome counts what a Process call did.
func (m *metrics) outcome(o queue.Outcome) {
	m.assigned.Add(float64(len(o.Assigned)))
	if o.Expired {
		m.expired.Inc()
	}
}

// StuckEntriesMetric is the stuck-entry gauge the alert rule watches.
const StuckEntriesMetric = "dubflow_dispatcher_stuck_entries"

// stuckCollector reads the stuck entries from Postgres at every scrape, so
// the gauge is right even when this replica's scan has stopped. Every
// replica reports the same database-wide number: alert on max(), not sum().
type stuckCollector struct {
	q    *queue.Queue
	desc *prometheus.Desc
}

func newStuckCollector(q *queue.Queue) *stuckCollector {
	return &stuckCollector{q: q, desc: prometheus.NewDesc(StuckEntriesMetric,
		"Waiting entries not attempted for QUEUE_PROCESS_RETRY_DELAY_SECONDS+QUEUE_STUCK_ENTRY_SECONDS and "+
			"reservations overdue by QUEUE_STUCK_ENTRY_SECONDS, and visitors queued for an agent that has a free unit "+
			"or is offline or moved: entries no replica is moving on (database-wide).",
		nil, nil)}
}

// Describe implements prometheus.Collector.
func (c *stuckCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector; a failed count is reported to
// the scrape as an error.
func (c *stuckCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.q.StuckEntries(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}
