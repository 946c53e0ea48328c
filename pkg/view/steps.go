package view

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// attemptRow is one row of task_steps.
type attemptRow struct {
	step, part string
	Attempt
}

// loadSteps reads the task's attempts and parts and sums them up per step.
func loadSteps(ctx context.Context, tx pgx.Tx, id uuid.UUID, parent bool) ([]Step, error) {
	rows, err := tx.Query(ctx, `SELECT step, part, attempt, status, worker, started_at, finished_at, error, wait_reason, wait_until
		FROM task_steps WHERE task_id = $1 ORDER BY started_at, id`, id)
	if err != nil {
		return nil, fmt.Errorf("read steps of %s: %w", id, err)
	}
	attempts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (attemptRow, error) {
		var a attemptRow
		err := r.Scan(&a.step, &a.part, &a.Attempt.Attempt, &a.Status, &a.Worker, &a.StartedAt, &a.FinishedAt, &a.Error, &a.WaitReason, &a.WaitUntil)
		if a.FinishedAt != nil {
			ms := a.FinishedAt.Sub(a.StartedAt).Milliseconds()
			a.DurationMS = &ms
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read steps of %s: %w", id, err)
	}
	registered := map[string][]string{}
	rows, err = tx.Query(ctx, `SELECT step, part FROM step_parts WHERE task_id = $1 ORDER BY created_at, part`, id)
	if err != nil {
		return nil, fmt.Errorf("read parts of %s: %w", id, err)
	}
	var stepName, part string
	if _, err := pgx.ForEachRow(rows, []any{&stepName, &part}, func() error {
		registered[stepName] = append(registered[stepName], part)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read parts of %s: %w", id, err)
	}
	var out []Step
	for _, name := range stepsOf(parent) {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT step_succeeded($1, $2)`, id, name).Scan(&ok); err != nil {
			return nil, fmt.Errorf("read step %s of %s: %w", name, id, err)
		}
		out = append(out, buildStep(name, ok, registered[name], attempts))
	}
	return out, nil
}

// buildStep groups a step's attempts by part; succeeded is the runtime's
// step_succeeded.
func buildStep(name string, succeeded bool, registered []string, attempts []attemptRow) Step {
	s := Step{Step: name, Parts: []Part{}}
	byPart := map[string]*Part{}
	for _, p := range registered {
		byPart[p] = &Part{Part: p, Status: "pending", Attempts: []Attempt{}}
	}
	for _, a := range attempts {
		if a.step != name {
			continue
		}
		p := byPart[a.part]
		if p == nil {
			p = &Part{Part: a.part, Attempts: []Attempt{}}
			byPart[a.part] = p
		}
		p.Attempts = append(p.Attempts, a.Attempt)
		s.Attempts++
		s.StartedAt = earliest(s.StartedAt, &a.StartedAt)
		s.FinishedAt = latest(s.FinishedAt, a.FinishedAt)
	}
	for _, p := range byPart {
		p.Status = partStatus(p.Attempts)
		s.Parts = append(s.Parts, *p)
	}
	sort.Slice(s.Parts, func(i, j int) bool { return s.Parts[i].Part < s.Parts[j].Part })
	s.Status = stepStatus(succeeded, s.Parts)
	if s.Status != "succeeded" {
		s.FinishedAt = nil
	}
	if s.StartedAt != nil && s.FinishedAt != nil {
		ms := s.FinishedAt.Sub(*s.StartedAt).Milliseconds()
		s.DurationMS = &ms
	}
	return s
}

// partStatus is succeeded when an attempt succeeded, else the status of the
// latest attempt (waiting when it ended waiting for an engine), pending
// without one.
func partStatus(as []Attempt) string {
	for _, a := range as {
		if a.Status == "succeeded" {
			return "succeeded"
		}
	}
	if len(as) == 0 {
		return "pending"
	}
	if last := as[len(as)-1]; last.Status == "failed" && last.WaitUntil != nil {
		return Waiting
	}
	return as[len(as)-1].Status
}

// Waiting is the status of a part (and step) whose last attempt found no
// engine of its pool able to serve: it goes on by itself at waitUntil.
const Waiting = "waiting"

// WaitOf is the wait of a task whose step waits for an engine, nil when
// none does: the latest wait of a waiting part.
func WaitOf(steps []Step) *Wait {
	var w *Wait
	for _, s := range steps {
		for _, p := range s.Parts {
			if p.Status != Waiting {
				continue
			}
			last := p.Attempts[len(p.Attempts)-1]
			if w == nil || last.WaitUntil.After(w.Until) {
				w = &Wait{Step: s.Step, Reason: last.WaitReason, Until: *last.WaitUntil}
			}
		}
	}
	if w != nil {
		what := waitWhat[w.Reason]
		if what == "" {
			what = "an engine"
		}
		w.Message = fmt.Sprintf("waiting for %s until %s UTC", what, w.Until.UTC().Format("15:04"))
	}
	return w
}

// waitWhat names what a wait's reason waits for.
var waitWhat = map[string]string{"no_quota": "quota", "rate_limit": "the rate limit", "no_engine": "an engine"}

// stepStatus sums up a step's parts: succeeded (every part has, by
// step_succeeded), running, waiting (for an engine), parked, failed, or
// pending (no attempt yet).
func stepStatus(succeeded bool, parts []Part) string {
	if succeeded {
		return "succeeded"
	}
	seen := map[string]bool{}
	for _, p := range parts {
		seen[p.Status] = true
	}
	for _, st := range []string{"running", Waiting, "parked", "failed"} {
		if seen[st] {
			return st
		}
	}
	if seen["succeeded"] {
		return "running" // some parts done, others not started
	}
	return "pending"
}

func earliest(a, b *time.Time) *time.Time {
	if b == nil || (a != nil && a.Before(*b)) {
		return a
	}
	t := *b
	return &t
}

// latest returns the later of two optional times.
func latest(a, b *time.Time) *time.Time {
	if b == nil || (a != nil && a.After(*b)) {
		return a
	}
	t := *b
	return &t
}
