package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/rs/zerolog"
)

// HeartbeatInterval is how often a worker process writes its row of
// worker_processes.
const HeartbeatInterval = 5 * time.Second

// LostAfter is how old a heartbeat may get before its process counts as
// lost: three missed heartbeats. A killed worker shows as lost at most
// LostAfter+HeartbeatInterval (20 s) after its last heartbeat.
const LostAfter = 3 * HeartbeatInterval

// Running is one step run a worker's consumer has in hand.
type Running struct {
	Consumer  string    `json:"consumer"`
	TaskID    string    `json:"taskId"`
	Step      string    `json:"step"`
	Part      string    `json:"part"`
	Attempt   int       `json:"attempt"`
	StartedAt time.Time `json:"startedAt"`
	// ElapsedSeconds is filled in when read (Processes).
	ElapsedSeconds float64 `json:"elapsedSeconds"`
}

// tracker knows what each consumer of a process runs and counts the runs
// that ended: a handler middleware (wrap).
type tracker struct {
	mu           sync.Mutex
	running      map[string]Running
	done, failed atomic.Int64
}

func newTracker() *tracker { return &tracker{running: map[string]Running{}} }

// wrap returns h noting each message consumer runs while it runs, and
// counting it done (nil) or failed (an error) when it returns.
func (t *tracker) wrap(consumer string, h step.Handler) step.Handler {
	return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		t.mu.Lock()
		t.running[consumer] = Running{Consumer: consumer, TaskID: msg.Envelope.TaskID.String(), Step: msg.Envelope.Step,
			Part: msg.Part, Attempt: msg.Envelope.Attempt, StartedAt: time.Now().UTC()}
		t.mu.Unlock()
		err := h.Handle(ctx, msg)
		t.mu.Lock()
		delete(t.running, consumer)
		t.mu.Unlock()
		if err != nil {
			t.failed.Add(1)
		} else {
			t.done.Add(1)
		}
		return err
	})
}

// snapshot is what the consumers run now, by consumer.
func (t *tracker) snapshot() []Running {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Running, 0, len(t.running))
	for _, r := range t.running {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Running) int { return a.StartedAt.Compare(b.StartedAt) })
	return out
}

// heartbeat writes one process's row of worker_processes.
type heartbeat struct {
	db        store.Querier
	log       zerolog.Logger
	id        string
	service   string
	steps     []string
	consumers int
	started   time.Time
	track     *tracker
}

// run writes the row at once and every HeartbeatInterval until ctx ends,
// then marks the process stopped.
func (h *heartbeat) run(ctx context.Context) error {
	h.beat(ctx)
	ops.Every(ctx, HeartbeatInterval, h.beat)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := h.db.Exec(stop, `UPDATE worker_processes SET stopped_at = now(), heartbeat_at = now(), running = $2
		WHERE id = $1`, h.id, json.RawMessage(mustJSON(h.track.snapshot()))); err != nil {
		h.log.Warn().Err(err).Msg("mark worker stopped")
	}
	return nil
}

// beat upserts the row (the database's clock) and removes rows nobody
// refreshed for a day.
func (h *heartbeat) beat(ctx context.Context) {
	host, _ := os.Hostname()
	_, err := h.db.Exec(ctx, `INSERT INTO worker_processes
		(id, service, host, pid, version, steps, consumers, started_at, running, done, failed)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), running = EXCLUDED.running,
		  done = EXCLUDED.done, failed = EXCLUDED.failed, stopped_at = NULL`,
		h.id, h.service, host, os.Getpid(), Version(), h.steps, h.consumers, h.started,
		json.RawMessage(mustJSON(h.track.snapshot())), h.track.done.Load(), h.track.failed.Load())
	if err == nil {
		_, err = h.db.Exec(ctx, `DELETE FROM worker_processes WHERE heartbeat_at < now() - interval '1 day'`)
	}
	if err != nil && ctx.Err() == nil {
		h.log.Warn().Err(err).Msg("worker heartbeat")
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Version is the build's version: the module version, else the VCS
// revision (12 digits, "+dirty" for a modified tree), else "devel".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev + dirty
}

// Process is one worker process as its heartbeats describe it.
type Process struct {
	ID          string     `json:"id"`
	Service     string     `json:"service"`
	Host        string     `json:"host"`
	PID         int        `json:"pid"`
	Version     string     `json:"version"`
	Steps       []string   `json:"steps"`
	Consumers   int        `json:"consumers"`
	StartedAt   time.Time  `json:"startedAt"`
	HeartbeatAt time.Time  `json:"heartbeatAt"`
	StoppedAt   *time.Time `json:"stoppedAt"`
	// Status is busy (running a step), idle, paused (every step it serves
	// is paused), lost (no heartbeat for LostAfter) or stopped.
	Status  string    `json:"status"`
	Running []Running `json:"running"`
	Done    int64     `json:"done"`
	Failed  int64     `json:"failed"`
}

// Processes lists the worker processes heard from in the last hour, the
// live ones first, by service and start.
func Processes(ctx context.Context, db store.Querier) ([]Process, error) {
	rows, err := db.Query(ctx, `SELECT w.id, w.service, w.host, w.pid, w.version, w.steps, w.consumers, w.started_at,
		       w.heartbeat_at, w.stopped_at, w.running, w.done, w.failed, now(),
		       w.heartbeat_at < now() - $1::interval,
		       NOT EXISTS (SELECT 1 FROM unnest(w.steps) s WHERE NOT EXISTS
		         (SELECT 1 FROM queue_pauses p WHERE p.step = s AND p.paused))
		  FROM worker_processes w
		 WHERE w.heartbeat_at > now() - interval '1 hour'
		 ORDER BY w.stopped_at IS NOT NULL, w.service, w.started_at DESC, w.id
		 LIMIT 1000`, LostAfter)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	defer rows.Close()
	var out []Process
	for rows.Next() {
		var p Process
		var running []byte
		var now time.Time
		var stale, paused bool
		if err := rows.Scan(&p.ID, &p.Service, &p.Host, &p.PID, &p.Version, &p.Steps, &p.Consumers, &p.StartedAt,
			&p.HeartbeatAt, &p.StoppedAt, &running, &p.Done, &p.Failed, &now, &stale, &paused); err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
		if err := json.Unmarshal(running, &p.Running); err != nil {
			return nil, fmt.Errorf("worker %s: running: %w", p.ID, err)
		}
		for i := range p.Running {
			p.Running[i].ElapsedSeconds = max(0, now.Sub(p.Running[i].StartedAt).Seconds())
		}
		p.Status = processStatus(p, stale, paused)
		out = append(out, p)
	}
	return out, rows.Err()
}

// processStatus names a process's state.
func processStatus(p Process, stale, paused bool) string {
	switch {
	case p.StoppedAt != nil:
		return "stopped"
	case stale:
		return "lost"
	case len(p.Running) > 0:
		return "busy"
	case paused && len(p.Steps) > 0:
		return "paused"
	}
	return "idle"
}
