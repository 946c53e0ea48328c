package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/jackc/pgx/v5"
)

// The metric history: a sample of each series every sampleEvery, kept at
// that resolution for fineFor, averaged per minute up to minutesFor,
// averaged per hour beyond, deleted after the retention
// (monitoring.metrics_retention_days) — so metric_samples stays bounded
// (~1,620 rows per series and key for the first day, 24 a day beyond).
const (
	sampleEvery = 15 * time.Second
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

// sampler writes the metric history. Every replica runs one; each sample
// is taken by the replica that gets the advisory lock first, once per
// aligned instant (the others find it taken).
type sampler struct {
	s   *server
	now func() time.Time
}

// run samples every sampleEvery until ctx ends.
func (m sampler) run(ctx context.Context) error {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		if err := m.sample(ctx); err != nil && ctx.Err() == nil {
			m.s.log.Warn().Err(err).Msg("metric sample")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sample takes the sample of the current aligned instant unless another
// replica holds the lock or took it, then downsamples and trims.
func (m sampler) sample(ctx context.Context) error {
	at := m.now().Truncate(sampleEvery)
	return pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
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
			m.s.log.Warn().Err(err).Msg("metric sample: queue depths")
		}
		return compact(ctx, tx, at, m.s.retention())
	})
}

// retention is how long the metric history is kept: the run-time setting
// monitoring.metrics_retention_days in force.
func (s *server) retention() time.Duration {
	return time.Duration(s.settings.Int(setting.MetricsRetentionDays)) * 24 * time.Hour
}

// sampleQueues records the ready messages of every watched queue.
func (m sampler) sampleQueues(ctx context.Context, tx pgx.Tx, at time.Time) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var names []string
	for _, q := range watchedQueues() {
		names = append(names, q.Name)
	}
	states, err := m.s.queues.Inspect(qctx, names)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, st := range states {
		if !st.Missing {
			b.Queue(`INSERT INTO metric_samples (series, key, at, value) VALUES ('queue_depth', $1, $2, $3)
				ON CONFLICT DO NOTHING`, st.Name, at, float64(st.Ready))
		}
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

// historyLine is one key's points of a series: [unix milliseconds, value].
type historyLine struct {
	Key    string       `json:"key"`
	Points [][2]float64 `json:"points"`
}

// historySeriesView is one series of GET /api/metrics/history.
type historySeriesView struct {
	Name  string        `json:"name"`
	Unit  string        `json:"unit"`
	Lines []historyLine `json:"lines"`
}

// history is what GET /api/metrics/history answers.
type history struct {
	Source string              `json:"source"`
	Since  time.Time           `json:"since"`
	Until  time.Time           `json:"until"`
	Series []historySeriesView `json:"series"`
}

// historyQuery is what a history request asks for.
type historyQuery struct {
	series       []string
	since, until time.Time
	step         string
	// project keeps that project's lines only (a project's token).
	project string
	// every: no series was asked for (every one is answered).
	every bool
}

// projectHistory narrows hq for a project's token: the per-project series
// only (all of them when none was asked), its own project's lines; another
// series is the installation's (403).
func projectHistory(hq *historyQuery, project string) error {
	if project == "" {
		return nil
	}
	hq.project = project
	if hq.every {
		hq.series = projectSeries
		return nil
	}
	for _, name := range hq.series {
		if !slices.Contains(projectSeries, name) {
			return apierr.Forbidden("forbidden", fmt.Sprintf("series %s is the whole installation's; a project's token reads %s",
				name, strings.Join(projectSeries, ", ")))
		}
	}
	return nil
}

// metricsHistory answers GET /api/metrics/history?series=a,b&since=6h&step=tts:
// the series (all when empty) since then (1h by default, at most the
// retention), of
// one step only when step is given, from Postgres — or from Prometheus
// when PROMETHEUS_URL is set.
func (s *server) metricsHistory(w http.ResponseWriter, r *http.Request) {
	hq, err := readHistoryQuery(r, s.retention())
	if err == nil {
		err = projectHistory(&hq, projectOf(r))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := history{Source: "postgres", Since: hq.since.UTC(), Until: hq.until.UTC(), Series: []historySeriesView{}}
	for _, name := range hq.series {
		var lines []historyLine
		if _, ok := promQueries[name]; ok && s.cfg.PrometheusURL != "" {
			out.Source = "prometheus"
			lines, err = s.promHistory(r.Context(), name, hq)
		} else {
			lines, err = s.pgHistory(r.Context(), name, hq)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if hq.project != "" {
			lines = slices.DeleteFunc(lines, func(l historyLine) bool { return l.Key != hq.project })
		}
		out.Series = append(out.Series, historySeriesView{Name: name, Unit: unitOf(name), Lines: keepStep(lines, hq.step, name)})
	}
	writeJSON(w, http.StatusOK, out)
}

func unitOf(name string) string {
	for _, h := range historySeries {
		if h.name == name {
			return h.unit
		}
	}
	return ""
}

// readHistoryQuery reads what a history request asks for; since goes back
// at most keep.
func readHistoryQuery(r *http.Request, keep time.Duration) (historyQuery, error) {
	q := r.URL.Query()
	now := time.Now()
	hq := historyQuery{since: now.Add(-time.Hour), until: now, step: q.Get("step")}
	if hq.step != "" && !slices.Contains(wire.Pipeline, hq.step) {
		return hq, apierr.BadRequest(fmt.Sprintf("step %q: want one of %v", apierr.Short(hq.step), wire.Pipeline))
	}
	since, _, err := timeRange(q.Get("since"), "")
	if err != nil {
		return hq, err
	}
	if since != nil {
		hq.since = *since
		if oldest := now.Add(-keep); hq.since.Before(oldest) {
			hq.since = oldest
		}
	}
	for _, name := range strings.Split(q.Get("series"), ",") {
		if name = strings.TrimSpace(name); name != "" && unitOf(name) == "" {
			return hq, apierr.BadRequest(fmt.Sprintf("series %q: want one of %s", apierr.Short(name), seriesNames()))
		} else if name != "" {
			hq.series = append(hq.series, name)
		}
	}
	if len(hq.series) == 0 {
		hq.series, hq.every = strings.Split(seriesNames(), ", "), true
	}
	return hq, nil
}

func seriesNames() string {
	var names []string
	for _, h := range historySeries {
		names = append(names, h.name)
	}
	return strings.Join(names, ", ")
}

// keepStep keeps the lines of one step (for queue_depth: its work queue);
// the lines of no step (tasks_done, tasks_failed) are kept whole.
func keepStep(lines []historyLine, step, series string) []historyLine {
	if step == "" {
		return lines
	}
	out := []historyLine{}
	for _, l := range lines {
		key := l.Key
		if series == "queue_depth" {
			key = wire.StepOfQueue(l.Key)
		}
		if key == step || l.Key == "" {
			out = append(out, l)
		}
	}
	return out
}

// pgHistory reads a series' samples since hq.since, oldest first.
func (s *server) pgHistory(ctx context.Context, name string, hq historyQuery) ([]historyLine, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, (extract(epoch FROM at) * 1000)::float8, value FROM metric_samples
		WHERE series = $1 AND at >= $2 AND at <= $3 ORDER BY key, at`, name, hq.since, hq.until)
	if err != nil {
		return nil, fmt.Errorf("read metric history: %w", err)
	}
	lines := []historyLine{}
	var key string
	var t, v float64
	_, err = pgx.ForEachRow(rows, []any{&key, &t, &v}, func() error {
		if len(lines) == 0 || lines[len(lines)-1].Key != key {
			lines = append(lines, historyLine{Key: key})
		}
		l := &lines[len(lines)-1]
		l.Points = append(l.Points, [2]float64{t, v})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read metric history: %w", err)
	}
	return lines, nil
}
