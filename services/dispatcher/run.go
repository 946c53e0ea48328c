package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/recovery"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/api"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/rs/zerolog"
)

// messageTimeout bounds the handling of one task.waiting_queue message.
const messageTimeout = 30 * time.Second

// run is the dispatcher: the HTTP API, the task.waiting_queue consumer and
// the periodic scan, until ctx is cancelled.
func run(ctx context.Context, environ map[string]string) error {
	var cfg Config
	p, err := service.Start(ctx, "dispatcher", environ, &cfg, service.Migrate())
	if err != nil {
		return err
	}
	defer p.Close()
	logStart(p.Log, &cfg)
	q := queue.New(p.Pool, queueConfig(&cfg, p.Settings))
	configureLive(q, &cfg, p.Settings)
	aq := agentqueue.New(p.Pool, cfg.QueueMaxN)
	m := newMetrics(p.Registry)
	p.Registry.MustRegister(newStuckCollector(q))
	if err := recoverAtStart(ctx, p, q, aq, m); err != nil {
		return err
	}
	runners, err := worker.Runners(ctx, p, wire.QueueWaiting, handlers{q: q, metrics: m}.routes(messageTimeout),
		func(c *step.Config) {
			// Events staged by the HTTP path and the scan are published by
			// the sweep; keep it prompt.
			c.SweepInterval, c.SweepAge = time.Second, 2*time.Second
		})
	if err != nil {
		return err
	}
	apiServer := api.New(q, aq, cfg.APIToken, p.Log)
	apiServer.AgentStatusPrivate = !cfg.AgentStatusPublic
	jobs := append(worker.Jobs(runners), serveAPI(p, apiServer, m, cfg.HTTPAddr))
	if cfg.ProcessEnabled {
		jobs = append(jobs, func(ctx context.Context) error {
			ops.Every(ctx, cfg.Interval(), func(ctx context.Context) { scan(ctx, q, m, p.Log) })
			return nil
		})
	}
	return p.Run(ctx, jobs...)
}

// serveAPI returns the job serving the public port: the API (behind the
// token) and a bare liveness answer; readiness and metrics are on the ops
// port only. Its log lines say "server":"api" (the ops port's say "ops").
func serveAPI(p *service.Process, apiServer *api.Server, m *metrics, addr string) service.Job {
	apiServer.Assigned = func(n int) { m.assigned.Add(float64(n)) }
	health, apiHandler := ops.Handler(p.Registry, nil), apiServer.Handler()
	// Not a ServeMux: it would answer a path with '.' or '..' segments with
	// a redirect to its cleaned form before the API could refuse it.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			health.ServeHTTP(w, r)
			return
		}
		apiHandler.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		MaxHeaderBytes: 64 << 10}
	log := p.Log.With().Str("server", "api").Logger()
	return func(ctx context.Context) error { return ops.ServeHTTP(ctx, addr, srv, 5*time.Second, log) }
}

// logStart logs the settings the dispatcher starts with.
func logStart(log zerolog.Logger, cfg *Config) {
	log.Info().Str("http_addr", cfg.HTTPAddr).Bool("process_enabled", cfg.ProcessEnabled).
		Float64("interval_seconds", cfg.IntervalSeconds).Int("batch_size", cfg.BatchSize).
		Int("max_workers", cfg.MaxWorkers).Int("max_retries", cfg.ProcessMaxRetries).
		Float64("retry_delay_seconds", cfg.RetryDelaySeconds).Int("queue_max_n", cfg.QueueMaxN).
		Float64("reservation_timeout_seconds", cfg.ReservationTimeoutSeconds).
		Bool("agent_status_public", cfg.AgentStatusPublic).Msg("dispatcher starting")
}

// scan runs one periodic scan and counts and logs what it did.
func scan(ctx context.Context, q *queue.Queue, m *metrics, log zerolog.Logger) {
	start := time.Now()
	res, err := q.Scan(ctx)
	m.scans.Inc()
	m.scanTime.Observe(time.Since(start).Seconds())
	m.assigned.Add(float64(len(res.Assigned)))
	m.expired.Add(float64(len(res.Expired)))
	m.reservationsExpired.Add(float64(len(res.ReservationsExpired)))
	if err != nil && ctx.Err() == nil {
		m.scanErrors.Inc()
		log.Warn().Err(err).Msg("scan met errors")
	}
	for _, e := range res.Expired {
		log.Info().Str("entry_id", e.ID.String()).Str("project_id", e.ProjectID.String()).
			Int("retry_count", e.RetryCount).Msg("entry expired")
	}
	if len(res.Assigned) > 0 || res.Attempted > 0 {
		log.Debug().Int("assigned", len(res.Assigned)).Int("attempted", res.Attempted).
			Int("expired", len(res.Expired)).Msg("scan done")
	}
}

// recoverAtStart finishes what a crashed replica left undone before this one
// serves: the shared start-up recovery (pkg/recovery), then overdue
// reservations, unmatched pairs, and counters that differ from the rows
// they count (see queue.Recover and agentqueue.RepairSizes), all logged on
// one line. It is safe while other replicas run; only the dispatcher's own
// pass failing stops the start.
func recoverAtStart(ctx context.Context, p *service.Process, q *queue.Queue, aq *agentqueue.Queue, m *metrics) error {
	var own error
	recovery.AtStart(ctx, p, recovery.Pass{Name: "waiting", Run: func(ctx context.Context) (map[string]int, error) {
		rec, err := q.Recover(ctx)
		if err != nil {
			own = fmt.Errorf("recover at start: %w", err)
			return nil, own
		}
		sizes, err := aq.RepairSizes(ctx)
		if err != nil {
			own = fmt.Errorf("recover at start: %w", err)
			return nil, own
		}
		m.assigned.Add(float64(len(rec.Assigned)))
		m.reservationsExpired.Add(float64(len(rec.ReservationsExpired)))
		return map[string]int{"reservations_expired": len(rec.ReservationsExpired), "loads_repaired": rec.LoadsRepaired,
			"assigned": len(rec.Assigned), "queue_sizes_repaired": sizes}, nil
	}})
	return own
}
