package ops

import "github.com/prometheus/client_golang/prometheus"

// Counter creates a counter and registers it on reg (nil: not registered).
func Counter(reg prometheus.Registerer, name, help string) prometheus.Counter {
	return register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// Counters creates a counter with labels and registers it on reg (nil: not
// registered).
func Counters(reg prometheus.Registerer, name, help string, labels ...string) *prometheus.CounterVec {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Histograms creates a histogram with buckets and labels and registers it
// on reg (nil: not registered).
func Histograms(reg prometheus.Registerer, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

// register registers c on reg unless reg is nil, and returns c.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// ProjectLabels is how many projects get a Prometheus project label of
// their own in one process (the rest share "other"): it bounds the series
// of every per-project metric, the step runtime's queue wait and the
// console's project gauges alike.
const ProjectLabels = 20
