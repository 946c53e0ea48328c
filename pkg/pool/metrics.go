package pool

import (
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the pools' Prometheus metrics, per engine. The schedule's
// own state (quota used and left, in flight, breaker) is exported by
// Collector, read from Postgres at each scrape.
type Metrics struct {
	calls *prometheus.CounterVec
	waits *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: on a
// registry of their own, which nothing scrapes).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	return &Metrics{
		calls: ops.Counters(reg, "dubflow_engine_calls_total",
			"Calls of a pool's engine, by step, engine and result (ok, rate_limited, quota, server_error, rejected, cut).",
			"step", "engine", "result"),
		waits: ops.Counters(reg, "dubflow_engine_pool_waits_total",
			"Steps that found no engine of their pool able to serve, by step and reason (no_quota, rate_limit, no_engine).",
			"step", "reason"),
	}
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
