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
	"golang.org/x/sync/errgroup"
)

// run reconciles every RECONCILE_INTERVAL_SECONDS until ctx is cancelled.
func run(ctx context.Context, environ map[string]string, logOut io.Writer) error {
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	log := worker.NewLogger("reconciler", cfg.Common, logOut)
	pool, err := worker.OpenDB(ctx, cfg.Common, log)
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

	m := newMetrics(reg)
	rec := &reconciler{pool: pool, pub: pub, depths: brokerDepths(conn, broker.DefaultDelayTiers), set: cfg.Settings()}
	interval := seconds(cfg.IntervalSeconds)
	log.Info().Dur("interval", interval).Dur("stuck_task", rec.set.StuckTask).Dur("lease_grace", rec.set.LeaseGrace).
		Dur("outbox_age", rec.set.OutboxAge).Dur("task_max_idle", rec.set.TaskMaxIdle).
		Dur("compensating_max", rec.set.CompensatingMax).Int("batch", rec.set.Batch).Msg("reconciler starting")
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
				m.record(a)
				logAction(log, a)
			}
			switch {
			case err != nil && gctx.Err() == nil:
				m.passes.WithLabelValues("error").Inc()
				log.Error().Err(err).Msg("reconcile pass")
			case err == nil:
				m.passes.WithLabelValues("ok").Inc()
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
