package main

import (
	"context"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/recovery"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/rs/zerolog"
)

// run reconciles every RECONCILE_INTERVAL_SECONDS until ctx is cancelled,
// logging to logOut (standard output when nil).
func run(ctx context.Context, environ map[string]string, logOut io.Writer) error {
	var cfg Config
	p, err := service.Start(ctx, "reconciler", environ, &cfg, service.Migrate(), service.LogTo(logOut))
	if err != nil {
		return err
	}
	defer p.Close()
	recovery.AtStart(ctx, p) // logged; the passes below retry what fails
	m := newMetrics(p.Registry)
	rec := &reconciler{pool: p.Pool, pub: p.Publisher(), depths: brokerDepths(p.PublishConn(), broker.DefaultDelayTiers),
		set: cfg.Settings()}
	rec.set.StuckTask = stuckTask(p.Settings, rec.set)
	interval := cfg.Interval()
	p.Log.Info().Dur("interval", interval).Dur("stuck_task", rec.set.StuckTask).Dur("lease_grace", rec.set.LeaseGrace).
		Dur("outbox_age", rec.set.OutboxAge).Dur("task_max_idle", rec.set.TaskMaxIdle).
		Dur("compensating_max", rec.set.CompensatingMax).Int("batch", rec.set.Batch).Msg("reconciler starting")
	pass := func(ctx context.Context) {
		rec.set.StuckTask = stuckTask(p.Settings, rec.set)
		rec.passOnce(ctx, m, p.Log)
	}
	return p.Run(ctx, func(ctx context.Context) error {
		pass(ctx)
		ops.Every(ctx, interval, pass)
		return nil
	})
}

// stuckTask is the stuck-task threshold in force: the run-time setting
// monitoring.stuck_task_threshold (seeded from STUCK_TASK_SECONDS), kept
// below half of RECONCILE_TASK_MAX_IDLE_SECONDS so that a lost message is
// re-driven before its task is ended.
func stuckTask(s *setting.Watch, set Settings) time.Duration {
	return min(s.Seconds(setting.StuckTaskThreshold), set.TaskMaxIdle/2)
}

// passOnce runs one reconcile pass (runOnce), then counts and logs what it
// did.
func (r *reconciler) passOnce(ctx context.Context, m *metrics, log zerolog.Logger) {
	acts, err := r.runOnce(ctx)
	for _, a := range acts {
		m.record(a)
		logAction(log, a)
	}
	switch {
	case err != nil && ctx.Err() == nil:
		m.passes.WithLabelValues("error").Inc()
		log.Error().Err(err).Msg("reconcile pass")
	case err == nil:
		m.passes.WithLabelValues("ok").Inc()
		log.Debug().Int("actions", len(acts)).Msg("reconcile pass done")
	}
}
