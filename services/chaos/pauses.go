package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pause is what one fault cost: the time from its start to the next step
// completed anywhere (a succeeded attempt's finish). None: no step
// completed after it (the run had no work left).
type pause struct {
	Kind  string
	At    time.Time
	Pause time.Duration
	None  bool
	// InFlight is, of the tasks that had a step running at the fault, the
	// longest time until that task's next completed step (its own work
	// included: a stall the first figure hides when other tasks go on).
	InFlight time.Duration
}

// measurePauses reads, for each fault, when the next step completed.
func measurePauses(ctx context.Context, pool *pgxpool.Pool, events []faultEvent) ([]pause, error) {
	var out []pause
	for _, e := range events {
		var next *time.Time
		if err := pool.QueryRow(ctx, `SELECT min(finished_at) FROM task_steps WHERE status = 'succeeded' AND finished_at > $1`,
			e.At).Scan(&next); err != nil {
			return nil, fmt.Errorf("next completed step after %s at %s: %w", e.Kind, e.At.Format(time.TimeOnly), err)
		}
		p := pause{Kind: e.Kind, At: e.At, None: next == nil}
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

// pauseLines are the longest pause per kind of fault, with every pause of
// the kind, for the summary.
func pauseLines(ps []pause, start time.Time) []string {
	byKind := map[string][]pause{}
	for _, p := range ps {
		byKind[p.Kind] = append(byKind[p.Kind], p)
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var lines []string
	for _, k := range kinds {
		var longest, inFlight time.Duration
		var each []string
		for _, p := range byKind[k] {
			at := p.At.Sub(start).Round(time.Second)
			inFlight = max(inFlight, p.InFlight)
			if p.None {
				each = append(each, fmt.Sprintf("at %s: no step after it", at))
				continue
			}
			longest = max(longest, p.Pause)
			each = append(each, fmt.Sprintf("at %s: %.1f s", at, p.Pause.Seconds()))
		}
		lines = append(lines, fmt.Sprintf("  %-20s %d × longest %5.1f s  (%s); a task in flight waited ≤ %.1f s for its next step",
			k, len(byKind[k]), longest.Seconds(), strings.Join(each, ", "), inFlight.Seconds()))
	}
	return lines
}

// healCheck is what reading the outputs from a MinIO process that was
// killed and rejoined found, the other processes but one stopped: with 2
// of 4 drives every object is readable only if the rejoined drive holds
// its shards again.
type healCheck struct {
	Process, With  int // 1-based
	Read, Total    int
	Rounds         int
	Err            string
	HealTook       time.Duration
	FirstUnreadble string
}

// checkHealed, for each MinIO process killed during the run: heals the
// bucket (the admin API, as `mc admin heal -r`), stops every other process
// but one, reads every done task's output through the set and starts the
// others again. An output that cannot be read so is read again after
// another heal, up to healRounds times; the rounds are reported.
func (r *runner) checkHealed(ctx context.Context, w *world, outputs []string) []healCheck {
	m := w.ha.minio
	w.ha.mu.Lock()
	var killed []int
	for i := range w.ha.minioKilled {
		killed = append(killed, i)
	}
	w.ha.mu.Unlock()
	sort.Ints(killed)
	var out []healCheck
	for _, k := range killed {
		c := healCheck{Process: k + 1, With: (k+1)%m.Nodes() + 1, Total: len(outputs)}
		left := outputs
		for c.Rounds < healRounds && len(left) > 0 && c.Err == "" {
			c.Rounds++
			began := time.Now()
			if err := m.Heal(ctx, s3Bucket, 5*time.Minute); err != nil {
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
	m := w.ha.minio
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
			logErr(r.logf, "minio restart after the heal check", m.Start(i))
		}
		logErr(r.logf, "minio after the heal check", m.WaitOnline(context.WithoutCancel(ctx), all, bootWait))
	}()
	if err := m.WaitOnline(ctx, []int{a, b}, bootWait); err != nil {
		return keys, err.Error()
	}
	var left []string
	first := ""
	tmp := filepath.Join(w.work, "outputs", "heal-check")
	for _, key := range keys {
		if err := readObject(ctx, w.objects, key, tmp); err != nil {
			left = append(left, key)
			if first == "" {
				first = key + ": " + oneLine(err.Error(), 160)
			}
		}
	}
	return left, first
}

// readObject downloads key (bounded) and removes the copy.
func readObject(ctx context.Context, objects *blob.Store, key, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := objects.GetFile(ctx, key, path, maxOutputBytes)
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

// printHA writes the -ha figures: the longest pause per fault and the
// MinIO heal checks.
func (s *summary) printHA(w io.Writer) {
	if !s.HA {
		return
	}
	goal := "report only"
	if s.MaxPause > 0 {
		goal = fmt.Sprintf("goal ≤ %s", s.MaxPause)
	}
	fmt.Fprintf(w, "pauses (fault → next completed step; %s):\n", goal)
	for _, l := range pauseLines(s.Pauses, s.Start) {
		fmt.Fprintln(w, l)
	}
	if len(s.HealChecks) == 0 {
		fmt.Fprintln(w, "minio heal check:           no MinIO process was killed")
	}
	for _, c := range s.HealChecks {
		if c.Err != "" {
			fmt.Fprintf(w, "minio heal check:           process %d: %s\n", c.Process, c.Err)
			continue
		}
		fmt.Fprintf(w, "minio heal check:           process %d killed and rejoined; %d of %d outputs read with only it and process %d up after %d heal rounds (%.1f s healing)\n",
			c.Process, c.Read, c.Total, c.With, c.Rounds, c.HealTook.Seconds())
		if c.FirstUnreadble != "" {
			fmt.Fprintf(w, "  unreadable in the last round: %s\n", c.FirstUnreadble)
		}
	}
}

// haVerdict lists why the -ha figures fail the run: a pause over the goal,
// a fault that could not be injected (a failover that did not happen), a
// heal check that could not read everything.
func (s *summary) haVerdict() []string {
	if !s.HA {
		return nil
	}
	var why []string
	over := 0
	for _, p := range s.Pauses {
		if s.MaxPause > 0 && !p.None && p.Pause > s.MaxPause {
			over++
		}
	}
	if over > 0 {
		why = append(why, fmt.Sprintf("%d pauses longer than %s", over, s.MaxPause))
	}
	failed := 0
	for k, n := range s.Faults {
		if strings.HasSuffix(k, "_error") {
			failed += n
		}
	}
	if failed > 0 {
		why = append(why, fmt.Sprintf("%d faults could not be injected or undone (see the fault counts)", failed))
	}
	for _, c := range s.HealChecks {
		if c.Err != "" || c.Read < c.Total {
			why = append(why, fmt.Sprintf("MinIO process %d: %d of %d outputs read after the heal %s", c.Process, c.Read, c.Total, c.Err))
		}
	}
	return why
}
