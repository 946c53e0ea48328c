package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/console/internal/history"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// fixedQueues answers every queue with 3 ready messages (the benchmarks
// measure the sampler's SQL, not the broker).
type fixedQueues struct{}

func (fixedQueues) Inspect(_ context.Context, names []string) (map[string]queueState, error) {
	out := map[string]queueState{}
	for _, n := range names {
		out[n] = queueState{Name: n, Ready: 3}
	}
	return out, nil
}

// benchConsole is a console on a fresh database holding 10,000 tasks (a
// tenth failed, with five attempts each and a dead letter), 10,000 audit
// entries and a day of metric history; it returns the server and a task
// with a long timeline.
func benchConsole(b *testing.B) (*server, uuid.UUID) {
	db := testenv.Postgres(b)
	ctx := context.Background()
	seed := []string{
		`INSERT INTO tasks (id, status, source_language, target_language, source_video_key, source_file_name, error, created_at, updated_at)
		 SELECT gen_random_uuid(), CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'done' END, 'en', CASE WHEN i % 3 = 0 THEN 'de' ELSE 'es' END,
		        'uploads/' || i || '/clip-' || i || '.mp4', 'Talk ' || i || ' (final).mp4', CASE WHEN i % 10 = 0 THEN 'asr: engine down ' || i ELSE '' END,
		        now() - i * interval '1 minute', now() - i * interval '1 minute'
		   FROM generate_series(1, 10000) i`,
		`INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at, error)
		 SELECT t.id, s.step, a, CASE WHEN t.status = 'failed' AND s.step = 'asr' THEN 'failed' ELSE 'succeeded' END, 'w1',
		        t.created_at + a * interval '1 second', t.created_at + a * interval '2 second',
		        CASE WHEN t.status = 'failed' AND s.step = 'asr' THEN 'engine down' ELSE '' END
		   FROM tasks t, unnest(ARRAY['extract_audio', 'asr']) s(step), generate_series(1, 1) a`,
		`INSERT INTO dead_letters (message_id, task_id, step, attempt, error_class, failure_reason, failed_at)
		 SELECT gen_random_uuid()::text, id, 'asr', 5, 'transient', 'engine down', created_at FROM tasks WHERE status = 'failed'`,
		`INSERT INTO console_audit (at, actor, role, action, target, outcome)
		 SELECT now() - i * interval '1 second', 'alice', 'admin', 'cancel', gen_random_uuid()::text, 'ok' FROM generate_series(1, 10000) i`,
		`INSERT INTO metric_samples (series, key, at, step_seconds, value)
		 SELECT 'step_attempts', k, date_trunc('minute', now()) - m * interval '1 minute', 60, m % 7
		   FROM unnest(ARRAY['extract_audio', 'asr', 'translate', 'tts', 'mux_video']) k, generate_series(60, 1440) m
		 UNION ALL
		 SELECT 'step_attempts', k, date_trunc('minute', now()) - s * interval '15 second', 15, s % 5
		   FROM unnest(ARRAY['extract_audio', 'asr', 'translate', 'tts', 'mux_video']) k, generate_series(0, 239) s`,
	}
	for _, q := range seed {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	var long uuid.UUID
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM tasks WHERE status = 'failed' LIMIT 1`).Scan(&long); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at, error)
		SELECT $1, 'tts', 'seg' || p, a, 'failed', 'w' || a, now() - interval '1 hour' + (p * 10 + a) * interval '1 second',
		       now() - interval '1 hour' + (p * 10 + a) * interval '1 second' + interval '500 ms', 'voice gone'
		  FROM generate_series(1, 40) p, generate_series(1, 5) a`, long); err != nil {
		b.Fatal(err)
	}
	// Its hand-backs: two reasons for each attempt of each part.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO step_handbacks (task_id, step, part, attempt, reason, worker, count, first_at, last_at)
		SELECT $1, 'tts', 'seg' || p, a, r, 'w' || a, 3, now() - interval '1 hour' + (p * 10 + a) * interval '1 second',
		       now() - interval '1 hour' + (p * 10 + a) * interval '1 second' + interval '200 ms'
		  FROM generate_series(1, 40) p, generate_series(1, 5) a, unnest(ARRAY['lease_held', 'unavailable']) r`, long); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	cfg := &Config{APIToken: adminToken, SessionHours: 1}
	return &server{cfg: cfg, log: zerolog.Nop(), pool: db.Pool, queues: fixedQueues{}, auth: newAuth(cfg),
		logins: ratelimit.New(100, 100)}, long
}

// serve runs one request through the handler and fails unless it answers
// want: the time measured is the server's, without a network.
func serve(b *testing.B, h http.Handler, method, path, body string, want int) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
}

func BenchmarkOpsRoutes(b *testing.B) {
	s, long := benchConsole(b)
	h := s.Handler()
	cases := []struct{ name, method, path, body string }{
		{"TaskList10k/firstPage", "GET", "/api/tasks?limit=50", ""},
		{"TaskList10k/page200", "GET", "/api/tasks?limit=200", ""},
		{"TaskList10k/searchFileName", "GET", "/api/tasks?q=clip-9999", ""},
		{"TaskList10k/searchUploadedName", "GET", "/api/tasks?q=talk+9999+(final)", ""},
		{"TaskList10k/searchIDPrefix", "GET", "/api/tasks?q=" + long.String()[:6], ""},
		{"TaskList10k/searchError", "GET", "/api/tasks?error=engine+down+99", ""},
		{"TaskList10k/searchNoHit", "GET", "/api/tasks?error=nothing-matches&language=de&since=7d", ""},
		{"Timeline/200attempts", "GET", "/api/tasks/" + long.String() + "/timeline", ""},
		{"History/24h", "GET", "/api/metrics/history?series=step_attempts&since=24h", ""},
		{"History/1hAllSeries", "GET", "/api/metrics/history", ""},
		{"Audit/firstPage", "GET", "/api/audit?limit=50", ""},
		{"Audit/byActor", "GET", "/api/audit?actor=alice&action=cancel&limit=50", ""},
		{"DeadLetters/replayDryRun", "POST", "/api/dead-letters/replay", `{"step":"asr","dryRun":true}`},
		{"DeadLetters/purgeDryRun", "POST", "/api/dead-letters/purge", `{"errorClass":"transient","since":"30d","dryRun":true}`},
		{"Versions", "GET", "/api/tasks/" + long.String() + "/versions", ""},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				serve(b, h, c.method, c.path, c.body, http.StatusOK)
			}
		})
	}
	b.Run("Sample", func(b *testing.B) {
		at := time.Now().Truncate(history.SampleEvery)
		for b.Loop() {
			at = at.Add(history.SampleEvery) // a new instant each time: a real sample, not a skip
			stamp := at
			if err := s.sampler(func() time.Time { return stamp }).Sample(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
