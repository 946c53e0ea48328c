package history

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Line is one key's points of a series: [unix milliseconds, value].
type Line struct {
	Key    string       `json:"key"`
	Points [][2]float64 `json:"points"`
}

// Series is one series of GET /api/metrics/history.
type Series struct {
	Name  string `json:"name"`
	Unit  string `json:"unit"`
	Lines []Line `json:"lines"`
}

// Report is what GET /api/metrics/history answers.
type Report struct {
	Source string    `json:"source"`
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	Series []Series  `json:"series"`
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

// Reader reads the metric history.
type Reader struct {
	Pool *pgxpool.Pool
	// PrometheusURL, when set, is where the series Prometheus has are
	// read instead.
	PrometheusURL string
	// Retention is how long the history is kept.
	Retention func() time.Duration
}

// Read answers GET /api/metrics/history?series=a,b&since=6h&step=tts (its
// query q): the series (all when empty) since then (1h by default, at most
// the retention), of one step only when step is given, from Postgres — or
// from Prometheus when PrometheusURL is set; of project's lines only when
// project is not "" (a project's token).
func (h Reader) Read(ctx context.Context, q url.Values, project string) (Report, error) {
	hq, err := readQuery(q, h.Retention())
	if err == nil {
		err = projectHistory(&hq, project)
	}
	if err != nil {
		return Report{}, err
	}
	out := Report{Source: "postgres", Since: hq.since.UTC(), Until: hq.until.UTC(), Series: []Series{}}
	for _, name := range hq.series {
		var lines []Line
		if _, ok := promQueries[name]; ok && h.PrometheusURL != "" {
			out.Source = "prometheus"
			lines, err = h.promHistory(ctx, name, hq)
		} else {
			lines, err = h.pgHistory(ctx, name, hq)
		}
		if err != nil {
			return Report{}, err
		}
		if hq.project != "" {
			lines = slices.DeleteFunc(lines, func(l Line) bool { return l.Key != hq.project })
		}
		out.Series = append(out.Series, Series{Name: name, Unit: unitOf(name), Lines: keepStep(lines, hq.step, name)})
	}
	return out, nil
}

func unitOf(name string) string {
	for _, h := range historySeries {
		if h.name == name {
			return h.unit
		}
	}
	return ""
}

// readQuery reads what a history request asks for; since goes back at
// most keep.
func readQuery(q url.Values, keep time.Duration) (historyQuery, error) {
	now := time.Now()
	hq := historyQuery{since: now.Add(-time.Hour), until: now, step: q.Get("step")}
	if hq.step != "" && !slices.Contains(wire.Pipeline, hq.step) {
		return hq, apierr.BadRequest(fmt.Sprintf("step %q: want one of %v", apierr.Short(hq.step), wire.Pipeline))
	}
	if v := q.Get("since"); v != "" {
		since, err := dlq.ParseSince(v, time.Now()) // the forms of the console's other since
		if err != nil {
			return hq, apierr.BadRequest(err.Error())
		}
		hq.since = since
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
		hq.series, hq.every = Names(), true
	}
	return hq, nil
}

// Names lists every series, in the order they are answered.
func Names() []string { return strings.Split(seriesNames(), ", ") }

func seriesNames() string {
	var names []string
	for _, h := range historySeries {
		names = append(names, h.name)
	}
	return strings.Join(names, ", ")
}

// keepStep keeps the lines of one step (for queue_depth: its work queue);
// the lines of no step (tasks_done, tasks_failed) are kept whole.
func keepStep(lines []Line, step, series string) []Line {
	if step == "" {
		return lines
	}
	out := []Line{}
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
func (h Reader) pgHistory(ctx context.Context, name string, hq historyQuery) ([]Line, error) {
	rows, err := h.Pool.Query(ctx, `SELECT key, (extract(epoch FROM at) * 1000)::float8, value FROM metric_samples
		WHERE series = $1 AND at >= $2 AND at <= $3 ORDER BY key, at`, name, hq.since, hq.until)
	if err != nil {
		return nil, fmt.Errorf("read metric history: %w", err)
	}
	lines := []Line{}
	var key string
	var t, v float64
	_, err = pgx.ForEachRow(rows, []any{&key, &t, &v}, func() error {
		if len(lines) == 0 || lines[len(lines)-1].Key != key {
			lines = append(lines, Line{Key: key})
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
