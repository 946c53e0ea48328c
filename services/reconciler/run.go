package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// run reconciles every RECONCILE_INTERVAL_SECONDS until ctx is cancelled.
func run(ctx context.Context, environ map[string]string, logOut io.Writer) error {
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	log := worker.NewLogger("reconciler", cfg.Common, logOut)
	pool, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := store.Migrate(ctx, pool); err != nil {
		return err
	}
	reg := ops.NewRegistry()
	brokerMetrics, err := broker.NewMetrics(reg)
	if err != nil {
		return err
	}
	conn, err := broker.Dial(ctx, cfg.AMQPURL, "reconciler-publish", log,
		broker.WithTopology(broker.Topology{DeliveryLimit: cfg.DeliveryLimit}), broker.WithMetrics(brokerMetrics))
	if err != nil {
		return err
	}
	defer conn.Close()
	pub := broker.NewPublisher(conn)
	defer pub.Close()

	actions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dubflow_reconciler_actions_total",
		Help: "What the reconciler re-drove, by action (lease_redriven, outbox_published, task_redriven, unrecoverable) and step.",
	}, []string{"action", "step"})
	passes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dubflow_reconciler_passes_total",
		Help: "Reconciliation passes, by result (ok, error).",
	}, []string{"result"})
	reg.MustRegister(actions, passes)

	rec := &reconciler{pool: pool, pub: pub, set: cfg.Settings()}
	interval := seconds(cfg.IntervalSeconds)
	log.Info().Dur("interval", interval).Dur("stuck_task", rec.set.StuckTask).Dur("lease_grace", rec.set.LeaseGrace).
		Dur("outbox_age", rec.set.OutboxAge).Int("batch", rec.set.Batch).Msg("reconciler starting")
	checks := map[string]ops.Check{
		"postgres": func(ctx context.Context) error { return pool.Ping(ctx) },
		"broker": func(context.Context) error {
			if !conn.Connected() {
				return errors.New("publishing connection down")
			}
			return nil
		},
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Serve(gctx, cfg.OpsAddr, ops.Handler(reg, checks), log) })
	g.Go(func() error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			acts, err := rec.pass(gctx)
			for _, a := range acts {
				actions.WithLabelValues(a.Kind, a.Step).Inc()
				ev := log.Warn()
				if a.Kind == actionUnrecoverable {
					ev = log.Error()
				}
				if a.Kind != actionOutbox {
					ev = ev.Str("task_id", a.TaskID.String()).Str("step", a.Step).Str("part", a.Part).Int("attempt", a.Attempt)
				}
				ev.Str("action", a.Kind).Str("detail", a.Detail).Msg("reconciler action")
			}
			switch {
			case err != nil && gctx.Err() == nil:
				passes.WithLabelValues("error").Inc()
				log.Error().Err(err).Msg("reconcile pass")
			case err == nil:
				passes.WithLabelValues("ok").Inc()
				log.Debug().Int("actions", len(acts)).Msg("reconcile pass done")
			}
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
			}
		}
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("reconciler: %w", err)
	}
	log.Info().Msg("reconciler stopped")
	return nil
}
