package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestSoak runs SOAK_TASKS (50) short tasks through the workers with a TTS
// engine that fails 20% of calls at random and a translation engine that
// hangs (times out) on 10% of calls, with the recorder and the reconciler
// running. After the automatic retries and one tts_requeue pass every task
// must be done, or failed with a recorded dead letter: none stuck, none
// silently lost. It runs only with DUBFLOW_SOAK=1 (make soak); it is not
// part of make test.
func TestSoak(t *testing.T) {
	if os.Getenv("DUBFLOW_SOAK") != "1" {
		t.Skip("soak test: run with DUBFLOW_SOAK=1 (make soak)")
	}
	n := 50
	if v, err := strconv.Atoi(os.Getenv("SOAK_TASKS")); err == nil && v > 0 {
		n = v
	}
	f := newFlow(t, map[string]string{
		"TIMEOUT_TRANSLATE_SECONDS": "2", "TTS_MAX_RETRIES": "2", "TTS_RETRY_DELAY_SECONDS": "0.05",
		"WORKER_CONCURRENCY": "2", "LOG_LEVEL": "warn",
		"RECONCILE_INTERVAL_SECONDS": "5", "STUCK_TASK_SECONDS": "120", "RECONCILE_LEASE_GRACE_SECONDS": "30",
	})
	f.engines.set(func(e *engines) { e.ttsFailRate, e.translateTimeout = 0.2, 0.1 })
	f.start(append(append([]string{}, workers...), "dlq_recorder", "reconciler")...)
	ctx := context.Background()
	// An integrator listening to the events (unbound event.* routing keys
	// would be unroutable).
	events := f.bindEvents()

	start := time.Now()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = f.submit(true)
	}
	counts := func() map[string]int {
		rows, err := f.db.Pool.Query(ctx, `SELECT status, count(*) FROM tasks GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var s string
			var c int
			if err := rows.Scan(&s, &c); err != nil {
				t.Fatal(err)
			}
			m[s] = c
		}
		return m
	}
	// settle waits until every task has left the given statuses (and all n
	// rows exist) for a few seconds in a row.
	settle := func(phase string, busy ...string) {
		var quiet time.Time
		var m map[string]int
		settled := func() bool {
			m = counts()
			total, active := 0, 0
			for s, c := range m {
				total += c
				for _, b := range busy {
					if s == b {
						active += c
					}
				}
			}
			switch {
			case total < n || active > 0:
				quiet = time.Time{}
			case quiet.IsZero():
				quiet = time.Now()
			}
			return !quiet.IsZero() && time.Since(quiet) > 5*time.Second
		}
		if !testenv.Poll(time.Now().Add(20*time.Minute), settled) {
			t.Fatalf("SOAK %s: not settled after 20 minutes: %v", phase, m)
		}
		t.Logf("SOAK %s settled after %s: %v", phase, time.Since(start).Round(time.Second), m)
	}
	settle("pipeline", "queued", "running")
	compensating := counts()["compensating"]
	out, err := f.command("tts_requeue", "-limit", "100")
	if err != nil {
		t.Fatal(err)
	}
	requeued := strings.Count(out, "requeued task")
	settle("after tts_requeue", "queued", "running", "compensating")
	elapsed := time.Since(start)

	// Every task done, or failed with its dead letter.
	var done, failed, lost int
	for _, id := range ids {
		s, e := f.status(id)
		var dls int
		if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM dead_letters WHERE task_id = $1`, id).Scan(&dls); err != nil {
			t.Fatal(err)
		}
		switch {
		case s == "done":
			done++
		case s == "failed" && dls > 0:
			failed++
		default:
			lost++
			t.Errorf("task %s ended %q (%s) with %d dead letters", id, s, e, dls)
		}
	}
	var outbox, retries, translateRetries, ttsParked, compensations, deadLetters int
	if err := f.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox),
		(SELECT count(*) FROM task_steps WHERE status = 'failed'),
		(SELECT count(*) FROM task_steps WHERE status = 'failed' AND step = 'translate'),
		(SELECT count(*) FROM task_steps WHERE status = 'parked'),
		(SELECT count(*) FROM tts_compensations),
		(SELECT count(*) FROM dead_letters)`).Scan(&outbox, &retries, &translateRetries, &ttsParked, &compensations, &deadLetters); err != nil {
		t.Fatal(err)
	}
	if outbox != 0 {
		t.Errorf("%d messages left in the outbox", outbox)
	}
	calls, ok := f.engines.counts()
	var ttsCalls, ttsOK int
	for k := range calls {
		ttsCalls += calls[k]
		ttsOK += ok[k]
	}
	f.engines.mu.Lock()
	timeouts := f.engines.timeouts
	f.engines.mu.Unlock()
	succeededEvents, failedEvents := events.count(wire.EventPrefix+wire.EventTaskSucceeded), events.count(wire.EventPrefix+wire.EventTaskFailed)
	if succeededEvents < done || failedEvents < failed {
		t.Errorf("events: %d task.succeeded and %d task.failed, want at least %d and %d", succeededEvents, failedEvents, done, failed)
	}
	rows, err := f.db.Pool.Query(ctx, `SELECT step, error_class, failure_reason FROM dead_letters ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var st, class, reason string
		if err := rows.Scan(&st, &class, &reason); err != nil {
			t.Fatal(err)
		}
		t.Logf("SOAK DEAD LETTER step=%s class=%s reason=%q", st, class, reason)
	}
	rows.Close()
	t.Logf("SOAK EVENTS task.succeeded=%d task.failed=%d", succeededEvents, failedEvents)
	t.Logf("SOAK RESULT tasks=%d done=%d failed_with_dead_letter=%d stuck_or_lost=%d elapsed=%s",
		n, done, failed, lost, elapsed.Round(time.Second))
	t.Logf("SOAK DETAIL failed_attempts=%d (translate %d) translate_timeouts=%d tts_calls=%d tts_failed_calls=%d "+
		"tts_parked=%d compensation_messages=%d compensating_tasks=%d requeued_tasks=%d dead_letters=%d outbox_left=%d",
		retries, translateRetries, timeouts, ttsCalls, ttsCalls-ttsOK, ttsParked, compensations, compensating,
		requeued, deadLetters, outbox)
}
