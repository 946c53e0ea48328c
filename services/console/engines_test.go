package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/services/console/internal/engines"
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

// TestEnginesListsSingleEnginesAsPoolsOfOne: on a default install (no
// pool configured) each step's engine, as its workers announce it, is a
// pool of one with its state: the step's attempts of the last day as its
// calls and errors, the running ones in flight, no_worker once no running
// worker announces it; a step with a pool lists its pool instead.
func TestEnginesListsSingleEnginesAsPoolsOfOne(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, c := range []engine.Capability{{Step: "asr", Worker: "asr-1", Engine: "pocketsphinx", Languages: []string{"en"}},
		{Step: "asr", Worker: "asr-2", Engine: "pocketsphinx", Languages: []string{"en"}},
		{Step: "translate", Worker: "translate-1", Engine: "apertium", Languages: []string{"en|es"}},
		{Step: "tts", Worker: "tts-1", Engine: "espeak", Languages: []string{"es"}}} {
		if err := engine.Announce(ctx, f.pool, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.pool.Exec(ctx, `UPDATE engine_capabilities SET seen_at = now() - interval '10 minutes' WHERE step = 'tts'`); err != nil {
		t.Fatal(err)
	}
	id := f.insertTask(t, "running", time.Now().Add(-time.Hour))
	f.addAttempt(t, id, "asr", "", 1, "failed", time.Now().Add(-50*time.Minute), time.Second)
	f.addAttempt(t, id, "asr", "", 2, "succeeded", time.Now().Add(-40*time.Minute), time.Second)
	f.addAttempt(t, id, "asr", "", 3, "failed", time.Now().Add(-30*time.Minute), time.Second)
	f.addAttempt(t, id, "asr", "", 4, "running", time.Now().Add(-time.Minute), 0)
	if _, err := f.pool.Exec(ctx, `UPDATE task_steps SET error = 'asr: no speech' WHERE attempt = 3`); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Engines []engines.View `json:"engines"`
	}
	f.doJSON(t, "GET", "/api/engines", nil, http.StatusOK, &out)
	if len(out.Engines) != 3 {
		t.Fatalf("engines %+v, want pocketsphinx, apertium and espeak", out.Engines)
	}
	asr, tr, tts := out.Engines[0], out.Engines[1], out.Engines[2]
	if asr.Name != "pocketsphinx" || asr.Pool != "single" || asr.State != "ready" || asr.Workers != 2 || asr.Calls != 3 ||
		asr.Errors != 2 || asr.Failures != 1 || asr.InFlight != 1 || asr.LastError != "asr: no speech" || asr.Left != -1 ||
		asr.Breaker != "closed" {
		t.Errorf("asr %+v: want pocketsphinx ready on 2 workers, 3 calls, 2 errors, 1 since the last success, 1 in flight", asr)
	}
	if tr.Name != "apertium" || tr.State != "ready" || tr.Calls != 0 || tts.Name != "espeak" || tts.State != "no_worker" {
		t.Errorf("translate %+v, tts %+v: want apertium ready, espeak with no worker", tr, tts)
	}
	cfg := pool.Config{Engines: []pool.Member{{Name: "glm-a", Kind: "openai", BaseURL: "http://a"}}}
	if err := cfg.Validate(pool.Kinds["translate"]); err != nil {
		t.Fatal(err)
	}
	if err := (&pool.Schedule{DB: f.pool, Step: "translate", Cfg: cfg}).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	f.doJSON(t, "GET", "/api/engines?step=translate", nil, http.StatusOK, &out)
	if len(out.Engines) != 1 || out.Engines[0].Name != "glm-a" || out.Engines[0].Pool != "pool" || out.Engines[0].State != "ready" {
		t.Errorf("translate with a pool: %+v, want its member only", out.Engines)
	}
}
