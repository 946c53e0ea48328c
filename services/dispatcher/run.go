package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/api"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// messageTimeout bounds the handling of one task.waiting_queue message.
const messageTimeout = 30 * time.Second

// run is the dispatcher: the HTTP API, the task.waiting_queue consumer and
// the periodic scan, until ctx is cancelled.
func run(ctx context.Context, getenv func(string) string) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Common)
	log.Info().Str("http_addr", cfg.HTTPAddr).Bool("process_enabled", cfg.ProcessEnabled).
		Float64("interval_seconds", cfg.IntervalSeconds).Int("batch_size", cfg.BatchSize).
		Int("max_workers", cfg.MaxWorkers).Int("max_retries", cfg.ProcessMaxRetries).
		Float64("retry_delay_seconds", cfg.RetryDelaySeconds).Int("queue_max_n", cfg.QueueMaxN).
		Float64("reservation_timeout_seconds", cfg.ReservationTimeoutSeconds).Msg("dispatcher starting")

	pool, err := worker.OpenDB(ctx, cfg.Common, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := store.Migrate(ctx, pool); err != nil {
		return err
	}
	q := queue.New(pool, cfg.Queue())
	aq := agentqueue.New(pool, cfg.QueueMaxN)
	reg := ops.NewRegistry()
	m := newMetrics(reg)
	reg.MustRegister(newStuckCollector(q))
	if err := recoverAtStart(ctx, q, aq, m, log); err != nil {
		return err
	}

	brokerMetrics, err := broker.NewMetrics(reg)
	if err != nil {
		return err
	}
	topo := broker.Topology{DeliveryLimit: cfg.DeliveryLimit}
	pubConn, err := broker.Dial(ctx, cfg.AMQPURL, "dispatcher-publish", log,
		broker.WithTopology(topo), broker.WithMetrics(brokerMetrics))
	if err != nil {
		return err
	}
	defer pubConn.Close()
	pub := broker.NewPublisher(pubConn)
	defer pub.Close()
	consConn, err := broker.Dial(ctx, cfg.AMQPURL, "dispatcher-consume", log, broker.WithTopology(topo))
	if err != nil {
		return err
	}
	defer consConn.Close()
	runner, err := step.NewRunner(step.Config{
		Queue:  broker.WaitingQueue,
		Routes: handlers{q: q, metrics: m}.routes(messageTimeout),
		Pool:   pool,
		Source: source{conn: consConn, opts: broker.ConsumeOptions{
			Queue: broker.WaitingQueue, Concurrency: cfg.Concurrency, Tag: "dispatcher"}},
		Publisher:     pub,
		Delay:         topo.DelayExchange,
		DLQ:           broker.DLQ,
		MaxRetries:    cfg.MaxRetries,
		Lease:         cfg.Lease(),
		ShutdownGrace: cfg.ShutdownGrace(),
		// Events staged by the HTTP path and the scan are published by the
		// sweep; keep it prompt.
		SweepInterval: time.Second,
		SweepAge:      2 * time.Second,
		Log:           log,
		Metrics:       step.NewMetrics(reg),
	})
	if err != nil {
		return err
	}

	opsHandler := ops.Handler(reg, map[string]ops.Check{
		"postgres": func(ctx context.Context) error { return pool.Ping(ctx) },
		"consumer": func(context.Context) error {
			if !runner.Running() || !consConn.Consuming() {
				return errors.New("not consuming " + broker.WaitingQueue)
			}
			return nil
		},
		"broker": func(context.Context) error {
			if !pubConn.Connected() {
				return errors.New("publishing connection down")
			}
			return nil
		},
	})
	apiServer := api.New(q, aq, cfg.APIToken, log)
	apiServer.Assigned = func(n int) { m.assigned.Add(float64(n)) }
	// The public port serves the API (behind the token) and a bare liveness
	// answer; readiness and metrics are on the ops port only.
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", opsHandler)
	mux.Handle("/", apiServer.Handler())

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Serve(gctx, cfg.HTTPAddr, mux, log) })
	g.Go(func() error { return ops.Serve(gctx, cfg.OpsAddr, opsHandler, log) })
	g.Go(func() error { return runner.Run(gctx) })
	if cfg.ProcessEnabled {
		g.Go(func() error { return scanLoop(gctx, q, cfg.Interval(), m, log) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	log.Info().Msg("dispatcher stopped")
	return nil
}

// scanLoop runs the periodic scan every interval until ctx is cancelled.
func scanLoop(ctx context.Context, q *queue.Queue, every time.Duration, m *metrics, log zerolog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
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
}

// recoverAtStart finishes what a crashed replica left undone before this one
// serves: overdue reservations, unmatched pairs, and counters that differ
// from the rows they count (see queue.Recover and agentqueue.RepairSizes).
// It is safe while other replicas run.
func recoverAtStart(ctx context.Context, q *queue.Queue, aq *agentqueue.Queue, m *metrics, log zerolog.Logger) error {
	rec, err := q.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover at start: %w", err)
	}
	sizes, err := aq.RepairSizes(ctx)
	if err != nil {
		return fmt.Errorf("recover at start: %w", err)
	}
	m.assigned.Add(float64(len(rec.Assigned)))
	m.reservationsExpired.Add(float64(len(rec.ReservationsExpired)))
	log.Info().Int("reservations_expired", len(rec.ReservationsExpired)).Int("loads_repaired", rec.LoadsRepaired).
		Int("assigned", len(rec.Assigned)).Int("queue_sizes_repaired", sizes).Msg("start-up recovery done")
	return nil
}

// newLogger returns the dispatcher's structured logger.
func newLogger(cfg config.Common) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		level = zerolog.InfoLevel
	}
	var w = zerolog.SyncWriter(os.Stdout)
	if cfg.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: os.Stdout, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("service", "dispatcher").Logger()
}

// source adapts a broker consumer to the step runtime.
type source struct {
	conn *broker.Conn
	opts broker.ConsumeOptions
}

// Consume delivers the queue's messages to handle until ctx is cancelled.
func (s source) Consume(ctx context.Context, handle func(context.Context, step.Delivery)) error {
	return s.conn.Consume(ctx, s.opts, func(ctx context.Context, d *broker.Delivery) {
		handle(ctx, step.Delivery{
			Body:       d.Body,
			RoutingKey: d.RoutingKey,
			Ack:        d.Ack,
			Nack:       func(requeue bool) error { return d.Nack(requeue) },
		})
	})
}
