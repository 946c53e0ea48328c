package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/services/console/internal/history"
	"github.com/rs/zerolog"
)

// watch gives the fixture's console a settings watch (as run does) and
// returns it: a test reads again with refresh.
func (f *fixture) watch(t *testing.T) func() {
	t.Helper()
	w := setting.NewWatch(f.pool, "console", nil, zerolog.Nop())
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.srv.settings = w
	// Start reads the table: a fresh Start reads it again.
	return func() {
		t.Helper()
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConfigAPI: GET /api/config lists every setting (a reader may);
// PUT refuses a read-only token, an unknown key (404) and a value out of
// bounds or of the wrong type (400, the database's words), changes a good
// one, and audits it with the value before and after.
func TestConfigAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var list settingsList
	decode(t, f.do(t, "GET", "/api/config", readToken, "", nil), http.StatusOK, &list)
	if len(list.Settings) != len(setting.Catalogue) || list.PollSeconds != 5 {
		t.Fatalf("list %+v", list)
	}
	if s := list.Settings[0]; s.Key != setting.CentralBatchSize || s.Value != "50" || s.UpdatedAt != nil ||
		s.Constraints.Min != 10 || s.Constraints.Max != 200 || s.Env != "QUEUE_PROCESS_BATCH_SIZE" {
		t.Errorf("first setting %+v", s)
	}
	put := func(token, key, body string, want int) *apiError {
		t.Helper()
		var e apiError
		decode(t, f.do(t, "PUT", "/api/config/"+key, token, "application/json", strings.NewReader(body)), want, &e)
		return &e
	}
	put(readToken, setting.CentralBatchSize, `{"value": 80}`, http.StatusForbidden)
	if e := put(adminToken, "queue.nothing", `{"value": 80}`, http.StatusNotFound); !strings.Contains(e.Message, `no such setting "queue.nothing"`) {
		t.Errorf("unknown key: %+v", e)
	}
	for body, want := range map[string]string{
		`{"value": 5}`:      "queue.central_batch_size 5: want 10..200",
		`{"value": "abc"}`:  `queue.central_batch_size "abc": want an integer`,
		`{"value": 50.5}`:   `queue.central_batch_size "50.5": want an integer`,
		`{"value": true}`:   "value: want a string or a number",
		`{}`:                `request body: want {"value": …}`,
		`{"value": "1e2"}`:  `queue.central_batch_size "1e2": want an integer`,
		`{"value": "201 "}`: `queue.central_batch_size "201 ": want an integer`,
	} {
		if e := put(adminToken, setting.CentralBatchSize, body, http.StatusBadRequest); e.Message != want {
			t.Errorf("PUT %s: %q, want %q", body, e.Message, want)
		}
	}
	var got setting.Setting
	decode(t, f.do(t, "PUT", "/api/config/"+setting.CentralBatchSize, adminToken, "application/json",
		strings.NewReader(`{"value": 80}`)), http.StatusOK, &got)
	if got.Value != "80" || got.UpdatedBy != "admin" || got.UpdatedAt == nil {
		t.Fatalf("after PUT: %+v", got)
	}
	var audit struct {
		Entries []audit.Entry `json:"entries"`
	}
	f.doJSON(t, "GET", "/api/audit?action=config", nil, http.StatusOK, &audit)
	var ok, refused int
	for _, e := range audit.Entries {
		want := setting.CentralBatchSize
		if e.Status == http.StatusNotFound {
			want = "queue.nothing"
		}
		if e.Target != want {
			t.Errorf("audit target %q, want %q", e.Target, want)
		}
		if e.Outcome == "ok" && e.Detail["from"] == "50" && e.Detail["value"] == "80" {
			ok++
		}
		if e.Status == http.StatusBadRequest {
			refused++
		}
	}
	if ok != 1 || refused < 5 {
		t.Errorf("audit entries %+v, want the change (50 to 80) and the refused values", audit.Entries)
	}
}

// TestRetentionAndStuckThresholdFollowTheSettings: the metric history is
// trimmed to monitoring.metrics_retention_days as it is now, and the
// health page counts stuck tasks by monitoring.stuck_task_threshold as it
// is now.
func TestRetentionAndStuckThresholdFollowTheSettings(t *testing.T) {
	t.Parallel()
	f := setup(t)
	reread := f.watch(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Hour)
	f.exec(t, `INSERT INTO metric_samples (series, key, at, step_seconds, value) VALUES
		('tasks_done', '', $1, 3600, 1), ('tasks_done', '', $2, 3600, 1)`, now.Add(-10*24*time.Hour), now.Add(-3*24*time.Hour))
	oldest := func() time.Duration {
		var at time.Time
		if err := f.pool.QueryRow(ctx, `SELECT min(at) FROM metric_samples`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return now.Sub(at)
	}
	sample := func() {
		if err := f.srv.sampler(func() time.Time { return now }).Sample(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(history.SampleEvery)
	}
	sample()
	if got := oldest(); got < 10*24*time.Hour {
		t.Fatalf("oldest sample %s old with the default 30 days, want the 10 days' kept", got)
	}
	if _, err := setting.Set(ctx, f.pool, setting.MetricsRetentionDays, "7", "test"); err != nil {
		t.Fatal(err)
	}
	reread()
	sample()
	if got := oldest(); got > 7*24*time.Hour {
		t.Fatalf("oldest sample %s old with 7 days, want nothing older", got)
	}

	f.exec(t, `INSERT INTO tasks (id, status, updated_at) VALUES (gen_random_uuid(), 'running', now() - interval '20 minutes')`)
	var h healthReport
	f.doJSON(t, "GET", "/api/system/health", nil, http.StatusOK, &h)
	if h.StuckTasks.Count != 1 || h.StuckTasks.ThresholdSeconds != 600 || h.Status == "healthy" {
		t.Fatalf("health with the default 600 s: %+v %s", h.StuckTasks, h.Status)
	}
	if _, err := setting.Set(ctx, f.pool, setting.StuckTaskThreshold, "1800", "test"); err != nil {
		t.Fatal(err)
	}
	reread()
	f.doJSON(t, "GET", "/api/system/health", nil, http.StatusOK, &h)
	if h.StuckTasks.Count != 0 || h.StuckTasks.ThresholdSeconds != 1800 {
		t.Fatalf("health with 1800 s: %+v", h.StuckTasks)
	}
}
