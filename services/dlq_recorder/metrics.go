package main

import (
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the recorder's Prometheus metrics. An alert on
// increase(dubflow_dead_letters_total[5m]) > 0 pages for new dead letters;
// dubflow_tts_compensations_total shows segments waiting for tts_requeue.
type metrics struct {
	deadLetters   *prometheus.CounterVec
	duplicates    prometheus.Counter
	compensations prometheus.Counter
	errors        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		deadLetters: ops.Counters(reg, "dubflow_dead_letters_total",
			"Dead letters recorded from task.dlq, by step, error class and source (service, broker, unknown).",
			"step", "error_class", "source"),
		duplicates: ops.Counter(reg, "dubflow_dead_letters_duplicate_total",
			"Deliveries of task.dlq that were recorded before (redeliveries)."),
		compensations: ops.Counter(reg, "dubflow_tts_compensations_total",
			"Messages of task.tts_compensation recorded against their segment."),
		errors: ops.Counters(reg, "dubflow_recorder_errors_total",
			"Deliveries the recorder could not record yet (handed back to their queue), by queue.", "queue"),
	}
}
