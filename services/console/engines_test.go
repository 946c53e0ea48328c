package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/pool"
)

// TestEnginesListsTheSchedule: GET /api/engines shows each engine of the
// pools as the shared schedule has it: quota used and left, in flight, an
// open breaker with its last error; ?step= keeps one step's pool.
func TestEnginesListsTheSchedule(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cfg := pool.Config{Engines: []pool.Member{{Name: "glm-a", Kind: "openai", BaseURL: "http://a", Limits: pool.Limits{DailyQuota: 1000, Concurrency: 2}},
		{Name: "apertium", Kind: "apertium", Limits: pool.Limits{Fallback: true}}}}
	if err := cfg.Validate(pool.Kinds["translate"]); err != nil {
		t.Fatal(err)
	}
	if err := (&pool.Schedule{DB: f.pool, Step: "translate", Cfg: cfg}).Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(context.Background(), `UPDATE engine_schedule SET used = 400, window_start = now(), in_flight = 1,
		failures = 3, errors = 3, breaker_until = now() + interval '30 seconds', last_error = 'http 503' WHERE name = 'glm-a'`); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Engines []pool.Status `json:"engines"`
	}
	f.doJSON(t, "GET", "/api/engines?step=translate", nil, http.StatusOK, &out)
	if len(out.Engines) != 2 {
		t.Fatalf("engines %+v, want 2", out.Engines)
	}
	a := out.Engines[0]
	if a.Name != "glm-a" || a.Used != 400 || a.Left != 600 || a.InFlight != 1 || a.Breaker != "open" ||
		a.LastError != "http 503" || time.Until(a.NextAt) < 20*time.Second {
		t.Errorf("glm-a %+v: want 400 used, 600 left, 1 in flight, breaker open for ~30s", a)
	}
	if b := out.Engines[1]; b.Name != "apertium" || !b.Fallback || b.Left != -1 || b.Breaker != "closed" {
		t.Errorf("apertium %+v: want a fallback without quota, breaker closed", b)
	}
	f.doJSON(t, "GET", "/api/engines?step=tts", nil, http.StatusOK, &out)
	if len(out.Engines) != 0 {
		t.Errorf("tts engines %+v, want none", out.Engines)
	}
	f.doJSON(t, "GET", "/api/engines?step=mux_video", nil, http.StatusBadRequest, nil)
}
