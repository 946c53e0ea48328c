// Package history is the console's metric history: a sampler that writes
// a sample of each series to metric_samples every SampleEvery, downsampled
// and trimmed as it ages, and the reader of GET /api/metrics/history,
// from that table or from Prometheus.
package history

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// The metric history: a sample of each series every sampleEvery, kept at
// that resolution for fineFor, averaged per minute up to minutesFor,
// averaged per hour beyond, deleted after the retention
// (monitoring.metrics_retention_days) — so metric_samples stays bounded
// (~1,620 rows per series and key for the first day, 24 a day beyond).
const (
	// SampleEvery is how often a sample is taken, and the finest
	// resolution kept.
	SampleEvery = 15 * time.Second
	fineFor     = time.Hour
	minutesFor  = 24 * time.Hour
	// samplerLock is the advisory lock the sampling replica holds for the
	// length of one sample's transaction.
	samplerLock = "dubflow.console.metrics-sampler"
)

// historySeries names every series and its unit.
var historySeries = []struct{ name, unit string }{
	{"queue_depth", "messages"},     // ready messages per queue (key: queue)
	{"step_attempts", "per_minute"}, // attempts started in the last minute (key: step)
	{"error_rate", "ratio"},         // failed / finished attempts in the last 5 minutes (key: step)
	{"step_duration_p50", "seconds"},
	{"step_duration_p95", "seconds"}, // of attempts finished in the last 5 minutes (key: step)
	{"tasks_done", "per_minute"},     // tasks that ended done in the last minute
	{"tasks_failed", "per_minute"},   // tasks that ended failed in the last minute
	// The same per project (key: project; a row only for a project with
	// such tasks that minute): what a project's token reads of the history.
	{"project_tasks_done", "per_minute"},
	{"project_tasks_failed", "per_minute"},
}

// projectSeries are the series a project's token may read: its project's
// lines only (projectHistory).
var projectSeries = []string{"project_tasks_done", "project_tasks_failed"}

// stepSeriesSQL computes every series but queue_depth at $1 and inserts it.
var stepSeriesSQL = `INSERT INTO metric_samples (series, key, at, value)
SELECT series, key, $1, value FROM (
  ` + view.ActivitySQL("$1::timestamptz", "$2::text[]") + `
  UNION ALL
  SELECT 'tasks_' || st, '', (SELECT count(*) FROM tasks WHERE status = st
          AND updated_at > $1::timestamptz - interval '1 minute' AND updated_at <= $1)::float8
    FROM unnest(ARRAY['done', 'failed']) st
  UNION ALL
  SELECT 'project_tasks_' || status, project, count(*)::float8 FROM tasks
   WHERE status IN ('done', 'failed') AND updated_at > $1::timestamptz - interval '1 minute' AND updated_at <= $1
   GROUP BY status, project
) v ON CONFLICT DO NOTHING`

// Sampler writes the metric history. Every replica runs one; each sample
// is taken by the replica that gets the advisory lock first, once per
// aligned instant (the others find it taken).
type Sampler struct {
	Pool *pgxpool.Pool
	Log  zerolog.Logger
	// Queues reads the ready messages of each queue watched that exists,
	// by name.
	Queues func(ctx context.Context) (map[string]int, error)
	// Retention is how long the history is kept (read at each sample).
	Retention func() time.Duration
	Now       func() time.Time
}

// Run samples every SampleEvery until ctx ends; a failed sample is logged.
func (m Sampler) Run(ctx context.Context) error {
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	for {
		if err := m.Sample(ctx); err != nil && ctx.Err() == nil {
			m.Log.Warn().Err(err).Msg("metric sample")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sample takes the sample of the current aligned instant unless another
// replica holds the lock or took it, then downsamples and trims.
func (m Sampler) Sample(ctx context.Context) error {
	at := m.Now().Truncate(SampleEvery)
	return pgx.BeginFunc(ctx, m.Pool, func(tx pgx.Tx) error {
		var got, taken bool
		err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)),
			EXISTS (SELECT 1 FROM metric_samples WHERE series = 'tasks_done' AND step_seconds = 15 AND at = $2)`,
			samplerLock, at).Scan(&got, &taken)
		if err != nil || !got || taken {
			return err
		}
		if _, err := tx.Exec(ctx, stepSeriesSQL, at, wire.Pipeline); err != nil {
			return fmt.Errorf("sample step series: %w", err)
		}
		if err := m.sampleQueues(ctx, tx, at); err != nil {
			m.Log.Warn().Err(err).Msg("metric sample: queue depths")
		}
		return compact(ctx, tx, at, m.Retention())
	})
}

// sampleQueues records the ready messages of every watched queue.
func (m Sampler) sampleQueues(ctx context.Context, tx pgx.Tx, at time.Time) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ready, err := m.Queues(qctx)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for name, n := range ready {
		b.Queue(`INSERT INTO metric_samples (series, key, at, value) VALUES ('queue_depth', $1, $2, $3)
			ON CONFLICT DO NOTHING`, name, at, float64(n))
	}
	return tx.SendBatch(ctx, b).Close()
}

// compact averages the fine samples older than fineFor into one per
// minute (whole minutes only), the minutes older than minutesFor into one
// per hour (whole hours only), and deletes what is older than keep.
func compact(ctx context.Context, tx pgx.Tx, at time.Time, keep time.Duration) error {
	cut, hourCut := at.Add(-fineFor).Truncate(time.Minute), at.Add(-minutesFor).Truncate(time.Hour)
	for _, tier := range []struct {
		from, to int
		unit     string
		before   time.Time
	}{{15, 60, "minute", cut}, {60, 3600, "hour", hourCut}} {
		if _, err := tx.Exec(ctx, `INSERT INTO metric_samples (series, key, at, step_seconds, value)
			SELECT series, key, date_trunc($4, at), $2, avg(value) FROM metric_samples
			 WHERE step_seconds = $1 AND at < $3 GROUP BY 1, 2, 3
			ON CONFLICT DO NOTHING`, tier.from, tier.to, tier.before, tier.unit); err != nil {
			return fmt.Errorf("downsample metric samples per %s: %w", tier.unit, err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM metric_samples WHERE (step_seconds = 15 AND at < $1)
		OR (step_seconds = 60 AND at < $2) OR at < $3`, cut, hourCut, at.Add(-keep)); err != nil {
		return fmt.Errorf("trim metric samples: %w", err)
	}
	return nil
}
