// Package projectmetrics exports the per-project metrics (issue 51), read
// from Postgres when scraped, with a bounded project label.
package projectmetrics

import (
	"context"
	"time"

	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Per-project metrics (issue 51), read from Postgres when scraped, over
// the tasks created in the last projectWindow: the project label is bounded
// as dubflow_step_wait_seconds's is — the ops.ProjectLabels projects
// with the most tasks keep their name, the others are summed as "other" —
// so that a service with thousands of projects exports a bounded number of
// series.
const projectWindow = 24 * time.Hour

// otherProjects labels the projects past the bound.
const otherProjects = "other"

// Collector exports the per-project metrics.
type Collector struct {
	pool        *pgxpool.Pool
	tasks       *prometheus.GaugeVec
	wait, first *prometheus.GaugeVec
	minutes     *prometheus.GaugeVec
}

// New returns the collector of the projects of pool's tasks.
func New(pool *pgxpool.Pool) *Collector {
	g := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	return &Collector{pool: pool,
		tasks: g("dubflow_project_tasks", "Tasks created in the last 24 h by project (the 20 with the most; then other) and state: "+
			"created, done, ended (done, failed or cancelled).", "project", "state"),
		wait: g("dubflow_project_queue_wait_seconds", "Mean queue wait of a part of the project's tasks created in the last 24 h "+
			"(the project's share of dubflow_step_wait_seconds).", "project"),
		first: g("dubflow_project_first_output_seconds", "Mean time from submission to the first dubbed segments of the "+
			"project's tasks created in the last 24 h (seed 003's first_email_delay).", "project"),
		minutes: g("dubflow_project_shared_engine_minutes", "Minutes of video the project's tasks took through the shared "+
			"engines today (UTC), against its daily limit (project_quota).", "project")}
}

func (c *Collector) vecs() []*prometheus.GaugeVec {
	return []*prometheus.GaugeVec{c.tasks, c.wait, c.first, c.minutes}
}

// Describe sends the metrics' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.vecs() {
		v.Describe(ch)
	}
}

// Collect reads the projects' metrics; a failed read exports the last.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.read(ctx); err == nil {
		for _, v := range c.vecs() {
			v.Collect(ch)
		}
	}
}

func (c *Collector) read(ctx context.Context) error {
	list, err := view.ProjectAverages(ctx, c.pool, time.Now().Add(-projectWindow), 10000)
	if err != nil {
		return err
	}
	minutes, err := sharedMinutesToday(ctx, c.pool)
	if err != nil {
		return err
	}
	for _, v := range c.vecs() {
		v.Reset()
	}
	named := map[string]bool{}
	for i, p := range boundProjects(list) {
		c.tasks.WithLabelValues(p.Project, "created").Set(float64(p.Tasks))
		c.tasks.WithLabelValues(p.Project, "done").Set(float64(p.Completed))
		c.tasks.WithLabelValues(p.Project, "ended").Set(float64(p.Ended))
		if p.AvgWait != nil {
			c.wait.WithLabelValues(p.Project).Set(*p.AvgWait)
		}
		if p.AvgFirstOutputDelay != nil {
			c.first.WithLabelValues(p.Project).Set(*p.AvgFirstOutputDelay)
		}
		if i < ops.ProjectLabels {
			named[p.Project] = true
		}
	}
	for project, m := range minutes {
		if !named[project] {
			project = otherProjects
		}
		c.minutes.WithLabelValues(project).Add(m)
	}
	return nil
}

// boundProjects keeps the first ops.ProjectLabels projects (the list
// is by task count, most first) and sums the others as "other": counts
// added, means weighted by the tasks.
func boundProjects(list []view.ProjectMetrics) []view.ProjectMetrics {
	if len(list) <= ops.ProjectLabels {
		return list
	}
	out := append([]view.ProjectMetrics{}, list[:ops.ProjectLabels]...)
	other := view.ProjectMetrics{Project: otherProjects}
	var wait, first float64
	var nWait, nFirst int
	for _, p := range list[ops.ProjectLabels:] {
		other.Tasks, other.Completed, other.Ended = other.Tasks+p.Tasks, other.Completed+p.Completed, other.Ended+p.Ended
		if p.AvgWait != nil {
			wait, nWait = wait+*p.AvgWait*float64(p.Tasks), nWait+p.Tasks
		}
		if p.AvgFirstOutputDelay != nil {
			first, nFirst = first+*p.AvgFirstOutputDelay*float64(p.Tasks), nFirst+p.Tasks
		}
	}
	if nWait > 0 {
		w := wait / float64(nWait)
		other.AvgWait = &w
	}
	if nFirst > 0 {
		f := first / float64(nFirst)
		other.AvgFirstOutputDelay = &f
	}
	return append(out, other)
}

// sharedMinutesToday reads each project's minutes on the shared engines
// today (UTC).
func sharedMinutesToday(ctx context.Context, pool *pgxpool.Pool) (map[string]float64, error) {
	rows, err := pool.Query(ctx, `SELECT project, shared_seconds / 60 FROM project_usage
		WHERE day = (now() AT TIME ZONE 'UTC')::date`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var p string
		var m float64
		if err := rows.Scan(&p, &m); err != nil {
			return nil, err
		}
		out[p] = m
	}
	return out, rows.Err()
}
