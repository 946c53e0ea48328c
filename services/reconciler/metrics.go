package main

import (
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// metrics are the reconciler's Prometheus series.
type metrics struct {
	actions  *prometheus.CounterVec
	redrives *prometheus.CounterVec
	waiting  *prometheus.CounterVec
	passes   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		actions: ops.Counters(reg, "dubflow_reconciler_actions_total",
			"What the reconciler did, by action (lease_redriven, task_redriven, skipped_waiting, suspected_lost, "+
				"outbox_published, attempt_closed, task_failed, task_cancelled, unrecoverable) and step; skipped_waiting counts parts.",
			"action", "step"),
		redrives: ops.Counters(reg, "dubflow_reconciler_redrives_total",
			"Messages the reconciler re-published because they were lost, by step and cause (lost: never claimed; lease_expired: its worker died).",
			"step", "cause"),
		waiting: ops.Counters(reg, "dubflow_reconciler_skipped_waiting_total",
			"Idle parts the reconciler did not re-drive because their message is still queued (counted at every pass), by step.",
			"step"),
		passes: ops.Counters(reg, "dubflow_reconciler_passes_total", "Reconciliation passes, by result (ok, error).", "result"),
	}
}

// record counts action a.
func (m *metrics) record(a Action) {
	m.actions.WithLabelValues(a.Kind, a.Step).Add(float64(a.n()))
	switch a.Kind {
	case actionStuck:
		m.redrives.WithLabelValues(a.Step, "lost").Inc()
	case actionLease:
		m.redrives.WithLabelValues(a.Step, "lease_expired").Inc()
	case actionWaiting:
		m.waiting.WithLabelValues(a.Step).Add(float64(a.n()))
	}
}

// logAction logs a: what waits at debug, suspicions at info, re-drives and
// closed attempts at warn, what ends or cannot be re-driven at error.
func logAction(log zerolog.Logger, a Action) {
	var ev *zerolog.Event
	switch a.Kind {
	case actionWaiting:
		ev = log.Debug().Int("parts", a.n())
	case actionSuspect:
		ev = log.Info()
	case actionUnrecoverable, actionFailed:
		ev = log.Error()
	default:
		ev = log.Warn()
	}
	if a.TaskID != uuid.Nil {
		ev = ev.Str("task_id", a.TaskID.String()).Str("part", a.Part).Int("attempt", a.Attempt)
	}
	ev.Str("step", a.Step).Str("action", a.Kind).Str("detail", a.Detail).Msg("reconciler action")
}
