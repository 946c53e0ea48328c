package history

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// promQueries are the PromQL queries of each history series, over the
// metrics the services export, and the label that keys a line. Tasks have
// no counter of their own: done is the succeeded mux_video attempts (a
// task's last step), failed the dead letters recorded.
var promQueries = map[string]struct{ query, label string }{
	"queue_depth": {`dubflow_queue_messages`, "queue"},
	"step_attempts": {`sum by (step) (increase(dubflow_step_messages_total{outcome=~"` + finishedOutcomes +
		`"}[1m]))`, "step"},
	"error_rate": {`sum by (step) (increase(dubflow_step_messages_total{outcome=~"retried|dead_lettered"}[5m])) / ` +
		`sum by (step) (increase(dubflow_step_messages_total{outcome=~"` + finishedOutcomes + `"}[5m]))`, "step"},
	"step_duration_p50": {`histogram_quantile(0.5, sum by (step, le) (rate(dubflow_step_duration_seconds_bucket[5m])))`, "step"},
	"step_duration_p95": {`histogram_quantile(0.95, sum by (step, le) (rate(dubflow_step_duration_seconds_bucket[5m])))`, "step"},
	"tasks_done":        {`sum(increase(dubflow_step_messages_total{step="mux_video",outcome="succeeded"}[1m]))`, ""},
	"tasks_failed":      {`sum(increase(dubflow_dead_letters_total[1m]))`, ""},
}

// finishedOutcomes are the step outcomes that end an attempt.
const finishedOutcomes = "succeeded|retried|dead_lettered|parked"

// promMatrix is the part of a Prometheus range query's answer read here.
type promMatrix struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// promHistory reads a series from Prometheus (query_range), at 15 s steps
// up to an hour, 60 s up to a day and an hour beyond, as the console's own
// history.
func (h Reader) promHistory(ctx context.Context, name string, hq historyQuery) ([]Line, error) {
	pq := promQueries[name]
	step := SampleEvery
	switch span := hq.until.Sub(hq.since); {
	case span > minutesFor:
		step = time.Hour
	case span > fineFor:
		step = time.Minute
	}
	v := url.Values{"query": {pq.query}, "start": {strconv.FormatInt(hq.since.Unix(), 10)},
		"end": {strconv.FormatInt(hq.until.Unix(), 10)}, "step": {strconv.Itoa(int(step / time.Second))}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimRight(h.PrometheusURL, "/")+"/api/v1/query_range?"+v.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("prometheus query: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, apierr.UnavailableBecause("prometheus (PROMETHEUS_URL) cannot be reached now; try again", err)
	}
	defer resp.Body.Close()
	var m promMatrix
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.Status != "success" {
		return nil, apierr.Unavailable(fmt.Sprintf("prometheus answered %s: %s", resp.Status, m.Error))
	}
	return promLines(m, pq.label), nil
}

// promLines turns a matrix into lines sorted by key, dropping NaN values.
func promLines(m promMatrix, label string) []Line {
	lines := []Line{}
	for _, r := range m.Data.Result {
		l := Line{Key: r.Metric[label]}
		for _, p := range r.Values {
			ts, _ := p[0].(float64)
			str, _ := p[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil || f != f {
				continue
			}
			l.Points = append(l.Points, [2]float64{ts * 1000, f})
		}
		lines = append(lines, l)
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].Key < lines[j].Key })
	return lines
}
