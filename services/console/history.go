package main

import (
	"context"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/services/console/internal/history"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
)

// The metric history is the history room's (internal/history): the
// sampler every replica runs, and the reader of GET /api/metrics/history.

// retention is how long the metric history is kept: the run-time setting
// monitoring.metrics_retention_days in force.
func (s *server) retention() time.Duration {
	return time.Duration(s.settings.Int(setting.MetricsRetentionDays)) * 24 * time.Hour
}

// sampler is the server's history sampler, its clock now.
func (s *server) sampler(now func() time.Time) history.Sampler {
	return history.Sampler{Pool: s.pool, Log: s.log, Queues: s.readyMessages, Retention: s.retention, Now: now}
}

// readyMessages reads the ready messages of every watched queue that
// exists.
func (s *server) readyMessages(ctx context.Context) (map[string]int, error) {
	var names []string
	for _, q := range inspect.Watched() {
		names = append(names, q.Name)
	}
	states, err := s.queues.Inspect(ctx, names)
	if err != nil {
		return nil, err
	}
	ready := make(map[string]int, len(states))
	for _, st := range states {
		if !st.Missing {
			ready[st.Name] = st.Ready
		}
	}
	return ready, nil
}

// metricsHistory answers GET /api/metrics/history (history.Reader.Read).
func (s *server) metricsHistory(w http.ResponseWriter, r *http.Request) {
	rd := history.Reader{Pool: s.pool, PrometheusURL: s.cfg.PrometheusURL, Retention: s.retention}
	out, err := rd.Read(r.Context(), r.URL.Query(), projectOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
