package pool

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the pools' Prometheus metrics, per engine. The schedule's
// own state (quota used and left, in flight, breaker) is exported by
// Collector, read from Postgres at each scrape.
type Metrics struct {
	calls *prometheus.CounterVec
	waits *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dubflow_engine_calls_total",
			Help: "Calls of a pool's engine, by step, engine and result (ok, rate_limited, quota, server_error, rejected, cut).",
		}, []string{"step", "engine", "result"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dubflow_engine_pool_waits_total",
			Help: "Steps that found no engine of their pool able to serve, by step and reason (no_quota, rate_limit, no_engine).",
		}, []string{"step", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.waits)
	}
	return m
}

func (m *Metrics) call(step, engine string, r result) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(step, engine, r.label()).Inc()
}

func (m *Metrics) wait(step, reason string) {
	if m == nil {
		return
	}
	m.waits.WithLabelValues(step, reason).Inc()
}

// label names a call's result in dubflow_engine_calls_total.
func (r result) label() string {
	switch {
	case r.ok:
		return "ok"
	case r.neutral:
		return "cut"
	case r.failure:
		return "server_error"
	case !r.coolUntil.IsZero() && r.refund:
		return "rate_limited"
	default:
		return "rejected"
	}
}
