package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/services/chaos/internal/faults"
	"github.com/dubflow/dubflow/services/chaos/internal/observe"
	"github.com/dubflow/dubflow/services/chaos/internal/report"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// measurePauses reads, for each fault, when the next step completed.
func measurePauses(ctx context.Context, pool *pgxpool.Pool, events []faults.FaultEvent) ([]report.Pause, error) {
	var out []report.Pause
	for _, e := range events {
		var next *time.Time
		if err := pool.QueryRow(ctx, `SELECT min(finished_at) FROM task_steps WHERE status = 'succeeded' AND finished_at > $1`,
			e.At).Scan(&next); err != nil {
			return nil, fmt.Errorf("next completed step after %s at %s: %w", e.Kind, e.At.Format(time.TimeOnly), err)
		}
		p := report.Pause{Kind: e.Kind, At: e.At, None: next == nil}
		if next != nil {
			p.Pause = next.Sub(e.At)
		}
		var inFlight *float64
		if err := pool.QueryRow(ctx, inFlightSQL, e.At).Scan(&inFlight); err != nil {
			return nil, fmt.Errorf("tasks in flight at %s at %s: %w", e.Kind, e.At.Format(time.TimeOnly), err)
		}
		if inFlight != nil {
			p.InFlight = time.Duration(*inFlight * float64(time.Second))
		}
		out = append(out, p)
	}
	return out, nil
}

// inFlightSQL is, for the tasks with an attempt running at $1, the longest
// time in seconds from $1 to the task's next succeeded attempt.
const inFlightSQL = `SELECT max(extract(epoch FROM n.next - $1))::float8 FROM (
	SELECT (SELECT min(s2.finished_at) FROM task_steps s2
	         WHERE s2.task_id = s.task_id AND s2.status = 'succeeded' AND s2.finished_at > $1) AS next
	  FROM task_steps s
	 WHERE s.started_at < $1 AND (s.finished_at IS NULL OR s.finished_at > $1)
	 GROUP BY s.task_id) n`

// checkHealed, for each MinIO process killed during the run: heals the
// bucket (the admin API, as `mc admin heal -r`), stops every other process
// but one, reads every done task's output through the set and starts the
// others again. An output that cannot be read so is read again after
// another heal, up to healRounds times; the rounds are reported.
func (r *runner) checkHealed(ctx context.Context, w *world, outputs []string) []report.HealCheck {
	m := w.ha.Minio
	killed := w.ha.MinioLostNodes()
	var out []report.HealCheck
	for _, k := range killed {
		c := report.HealCheck{Process: k + 1, With: (k+1)%m.Nodes() + 1, Total: len(outputs)}
		left := outputs
		for c.Rounds < healRounds && len(left) > 0 && c.Err == "" {
			c.Rounds++
			began := time.Now()
			if err := m.Heal(ctx, stack.S3Bucket, 5*time.Minute); err != nil {
				c.Err = err.Error()
				break
			}
			c.HealTook += time.Since(began)
			left, c.FirstUnreadble = r.readWithTwo(ctx, w, k, c.With-1, left)
		}
		c.Read = len(outputs) - len(left)
		r.logf("minio heal check: process %d rejoined; %d of %d outputs read with only it and process %d up (%d heal rounds, %s healing)",
			c.Process, c.Read, c.Total, c.With, c.Rounds, c.HealTook.Round(time.Millisecond))
		out = append(out, c)
	}
	return out
}

// healRounds bounds the heals and reads of one heal check.
const healRounds = 3

// readWithTwo stops every MinIO process but a and b, downloads each of
// keys, starts the others again and returns the keys it could not read
// (and the first failure).
func (r *runner) readWithTwo(ctx context.Context, w *world, a, b int, keys []string) ([]string, string) {
	m := w.ha.Minio
	var stopped []int
	for i := range m.Nodes() {
		if i != a && i != b {
			m.Stop(i)
			stopped = append(stopped, i)
		}
	}
	defer func() {
		var all []int
		for i := range m.Nodes() {
			all = append(all, i)
		}
		for _, i := range stopped {
			stack.LogErr(r.logf, "minio restart after the heal check", m.Start(i))
		}
		stack.LogErr(r.logf, "minio after the heal check", m.WaitOnline(context.WithoutCancel(ctx), all, stack.BootWait))
	}()
	if err := m.WaitOnline(ctx, []int{a, b}, stack.BootWait); err != nil {
		return keys, err.Error()
	}
	var left []string
	first := ""
	tmp := filepath.Join(w.work, "outputs", "heal-check")
	for _, key := range keys {
		if err := readObject(ctx, w.objects, key, tmp); err != nil {
			left = append(left, key)
			if first == "" {
				first = key + ": " + observe.OneLine(err.Error(), 160)
			}
		}
	}
	return left, first
}

// readObject downloads key (bounded) and removes the copy.
func readObject(ctx context.Context, objects *blob.Store, key, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := objects.GetFile(ctx, key, path, observe.MaxOutputBytes)
	if rmErr := os.Remove(path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		return rmErr
	}
	return err
}

// doneOutputs lists the output keys of the done tasks that have one.
func doneOutputs(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT output_video_key FROM tasks WHERE status = 'done' AND output_video_key <> ''
		AND cardinality(coalesce(targets, '{}')) = 0 ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("list outputs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
