package main

import "github.com/prometheus/client_golang/prometheus"

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
	m := &metrics{
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dubflow_dead_letters_total",
			Help: "Dead letters recorded from task.dlq, by step, error class and source (service, broker, unknown).",
		}, []string{"step", "error_class", "source"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dubflow_dead_letters_duplicate_total",
			Help: "Deliveries of task.dlq that were recorded before (redeliveries).",
		}),
		compensations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dubflow_tts_compensations_total",
			Help: "Messages of task.tts_compensation recorded against their segment.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dubflow_recorder_errors_total",
			Help: "Deliveries the recorder could not record yet (handed back to their queue), by queue.",
		}, []string{"queue"}),
	}
	reg.MustRegister(m.deadLetters, m.duplicates, m.compensations, m.errors)
	return m
}
