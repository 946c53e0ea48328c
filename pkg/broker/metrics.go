package broker

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the broker layer's Prometheus counters. One Metrics serves
// every Conn of a process; series are labelled with the connection name.
// A nil *Metrics records nothing.
type Metrics struct {
	reconnects    *prometheus.CounterVec
	publishes     *prometheus.CounterVec
	retries       *prometheus.CounterVec
	subscriptions *prometheus.CounterVec
}

// NewMetrics creates the counters and registers them on reg (never the
// global registry unless the caller passes it).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dubflow", Subsystem: "broker", Name: "reconnects_total",
			Help: "Connections re-established after a loss.",
		}, []string{"conn"}),
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dubflow", Subsystem: "broker", Name: "publishes_total",
			Help: "Publish attempts by outcome: ack (confirmed), nack, unconfirmed (no confirm within the confirm timeout), returned (unroutable), lost (connection lost before the confirm).",
		}, []string{"conn", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dubflow", Subsystem: "broker", Name: "publish_retries_total",
			Help: "Messages published again, by reason: nack, unconfirmed, lost. Nacks and missing confirms rise while a quorum queue elects a new leader.",
		}, []string{"conn", "reason"}),
		subscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dubflow", Subsystem: "broker", Name: "subscriptions_total",
			Help: "Consumers started on a queue, including re-subscriptions after a recovery.",
		}, []string{"conn", "queue"}),
	}
	for _, c := range []prometheus.Collector{m.reconnects, m.publishes, m.retries, m.subscriptions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register broker metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) reconnected(conn string) {
	if m != nil {
		m.reconnects.WithLabelValues(conn).Inc()
	}
}

func (m *Metrics) published(conn, result string) {
	if m != nil {
		m.publishes.WithLabelValues(conn, result).Inc()
	}
}

func (m *Metrics) retried(conn, reason string) {
	if m != nil {
		m.retries.WithLabelValues(conn, reason).Inc()
	}
}

func (m *Metrics) subscribed(conn, queue string) {
	if m != nil {
		m.subscriptions.WithLabelValues(conn, queue).Inc()
	}
}
