// Package engines is what GET /api/engines lists: each step's engines as
// the shared schedule (pkg/pool) sees them, or a step's single engine as a
// pool of one.
package engines

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/jackc/pgx/v5"
)

// View is one engine of GET /api/engines: a member of a step's pool
// as the shared schedule (pkg/pool) sees it, or the single engine of a
// step that runs without a pool (ASR_ENGINE, TRANSLATE_ENGINE, TTS_ENGINE
// alone: pocketsphinx, apertium and espeak on a default install) shown as
// a pool of one.
type View struct {
	pool.Status
	// Pool is "pool" for a member of ASR_POOL, TRANSLATE_POOL or TTS_POOL,
	// "single" for a step's one engine.
	Pool string `json:"pool"`
	// State is what the engine can do now: "ready"; "limited" (a pool
	// member waiting for its rate, quota or concurrency); "broken" (its
	// breaker is open); "no_worker" (a single engine no running worker
	// announced in the last two minutes: its workers are stopped or
	// scaled to zero).
	State string `json:"state"`
	// Workers counts the running workers that announced a single engine
	// (0 for a pool member: the schedule does not know them); SeenAt is
	// the latest announcement.
	Workers int        `json:"workers"`
	SeenAt  *time.Time `json:"seen_at"`
}

// liveAnnouncement is how recent a worker's announcement of its engine
// must be for the worker to count as running: it renews it every
// engine.RefreshInterval.
const liveAnnouncement = 2 * engine.RefreshInterval

// singleWindow is how far back a single engine's attempts are counted.
const singleWindow = 24 * time.Hour

// List reads the engines of step ("" for every step) at now: every
// member of the steps' pools as the shared schedule sees it — quota used
// and left in the window the engine last worked in, calls in flight, when
// it is available next, its errors and its breaker — and, for a step
// without a pool, its single engine as a pool of one; by step, in the
// pipeline's order. A step without engines is a 400.
func List(ctx context.Context, db pool.DB, step string, now time.Time) ([]View, error) {
	if step != "" && pool.Kinds[step] == nil {
		return nil, apierr.BadRequest(fmt.Sprintf("step %q: want one of %s, %s, %s", step, wire.StepASR, wire.StepTranslate, wire.StepTTS))
	}
	members, err := pool.Read(ctx, db, step, now, nil)
	if err != nil {
		return nil, err
	}
	engines := make([]View, 0, len(members)+3)
	pooled := map[string]bool{}
	for _, m := range members {
		engines = append(engines, View{Status: m, Pool: "pool", State: memberState(m, now)})
		pooled[m.Step] = true
	}
	singles, err := singleEngines(ctx, db, step, now)
	if err != nil {
		return nil, err
	}
	for _, e := range singles {
		if !pooled[e.Step] {
			engines = append(engines, e)
		}
	}
	sortEngines(engines)
	return engines, nil
}

// memberState is a pool member's state at now.
func memberState(m pool.Status, now time.Time) string {
	switch {
	case m.Breaker == "open":
		return "broken"
	case m.NextAt.After(now), m.Left == 0, m.Concurrency > 0 && m.InFlight >= m.Concurrency:
		return "limited"
	}
	return "ready"
}

// sortEngines orders the engines by step, in the pipeline's order, pool
// members before a single engine (a step has one or the other).
func sortEngines(es []View) {
	rank := map[string]int{}
	for i, st := range wire.Pipeline {
		rank[st] = i
	}
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && rank[es[j].Step] < rank[es[j-1].Step]; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// singleSQL reads, for each step (of $1; every step when ”), the engine
// its workers announced last (engine_capabilities), how many workers
// announced it in the last $2 seconds (the database's clock, which wrote
// them), and the step's attempts since $3 (task_steps):
// finished, failed, failed since its last success, running under a live
// lease, and the last failure.
const singleSQL = `WITH c AS (
    SELECT DISTINCT ON (step) step, engine, max(seen_at) OVER (PARTITION BY step, engine) AS seen_at
      FROM engine_capabilities WHERE $1 = '' OR step = $1
     ORDER BY step, seen_at DESC
)
SELECT c.step, c.engine, c.seen_at,
       (SELECT count(*) FROM engine_capabilities e WHERE e.step = c.step AND e.engine = c.engine
         AND e.seen_at > now() - $2 * interval '1 second'),
       a.calls, a.errors, a.failures, a.in_flight, coalesce(l.error, ''), l.finished_at
  FROM c
  CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE t.status IN ('succeeded', 'failed')) AS calls,
           count(*) FILTER (WHERE t.status = 'failed') AS errors,
           count(*) FILTER (WHERE t.status = 'failed' AND t.started_at > coalesce(
               (SELECT max(s.started_at) FROM task_steps s WHERE s.step = c.step AND s.status = 'succeeded' AND s.started_at > $3),
               '-infinity')) AS failures,
           count(*) FILTER (WHERE t.status = 'running' AND t.lease_until > now()) AS in_flight
      FROM task_steps t WHERE t.step = c.step AND t.started_at > $3) a
  LEFT JOIN LATERAL (
    SELECT t.error, t.finished_at FROM task_steps t
     WHERE t.step = c.step AND t.status = 'failed' AND t.started_at > $3
     ORDER BY t.started_at DESC LIMIT 1) l ON true
 ORDER BY c.step`

// singleEngines reads each step's single engine as a pool of one: weight
// 1, no limits, no quota, its breaker closed (a single engine is always
// called); calls and errors count the step's attempts of the last 24
// hours, failures the attempts failed since its last success, in_flight
// the attempts running now.
func singleEngines(ctx context.Context, q pool.DB, step string, now time.Time) ([]View, error) {
	rows, err := q.Query(ctx, singleSQL, step, liveAnnouncement.Seconds(), now.Add(-singleWindow))
	if err != nil {
		return nil, fmt.Errorf("read single engines: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (View, error) {
		e := View{Pool: "single"}
		var seen time.Time
		err := row.Scan(&e.Step, &e.Name, &seen, &e.Workers, &e.Calls, &e.Errors, &e.Failures, &e.InFlight,
			&e.LastError, &e.LastErrorAt)
		e.Kind, e.Weight, e.Left, e.NextAt, e.Breaker, e.SeenAt = e.Name, 1, -1, now, "closed", &seen
		e.State = "ready"
		if e.Workers == 0 {
			e.State = "no_worker"
		}
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read single engines: %w", err)
	}
	return out, nil
}
