package view

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// attemptRow is one attempt of a step's part.
type attemptRow struct {
	step, part string
	Attempt
}

// loadSteps reads the task's attempts and parts and sums them up per step.
func loadSteps(ctx context.Context, tx pgx.Tx, id uuid.UUID, parent bool, plan *task.Plan) ([]Step, error) {
	rows, err := attempt.Rows(ctx, tx, []uuid.UUID{id}, time.Time{}, false)
	if err != nil {
		return nil, fmt.Errorf("read steps of %s: %w", id, err)
	}
	attempts := make([]attemptRow, len(rows))
	for i, r := range rows {
		attempts[i] = attemptRow{step: r.Step, part: r.Part, Attempt: attemptOf(r)}
	}
	parts, err := attempt.Parts(ctx, tx, id, "")
	if err != nil {
		return nil, err
	}
	registered := map[string][]string{}
	for _, p := range parts {
		registered[p.Step] = append(registered[p.Step], p.Part)
	}
	var out []Step
	for _, name := range stepsOf(parent) {
		if plan != nil && plan.Skips(name) {
			out = append(out, Step{Step: name, Status: Skipped, Parts: []Part{}})
			continue
		}
		ok, err := StepSucceeded(ctx, tx, id, name)
		if err != nil {
			return nil, err
		}
		out = append(out, buildStep(name, ok, registered[name], attempts))
	}
	return out, nil
}

// Skipped is the status of a step the task's plan leaves out (a task from
// subtitles skips asr, and translate for subtitles in the target
// language): no attempt of it is ever made.
const Skipped = "skipped"

// loadPlan reads the task's plan: nil when it asks nothing.
func loadPlan(ctx context.Context, q task.Querier, id uuid.UUID) (*task.Plan, error) {
	p, err := task.LoadPlan(ctx, q, id)
	if err != nil || p.IsZero() {
		return nil, err
	}
	return &p, nil
}

// StepSucceeded reports whether every part of the task's step succeeded
// (the runtime's step_succeeded).
func StepSucceeded(ctx context.Context, db Querier, id uuid.UUID, step string) (bool, error) {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT step_succeeded($1, $2)`, id, step).Scan(&ok); err != nil {
		return false, fmt.Errorf("read step %s of %s: %w", step, id, err)
	}
	return ok, nil
}

// attemptOf is an attempt as the read model shows it, with its duration
// once it ended.
func attemptOf(r attempt.Row) Attempt {
	a := Attempt{Attempt: r.Attempt, Status: r.Status, Worker: r.Worker, StartedAt: r.StartedAt,
		FinishedAt: r.FinishedAt, Error: r.Error, WaitReason: r.WaitReason, WaitUntil: r.WaitUntil, QueueWaitMS: r.QueueWaitMS}
	if a.FinishedAt != nil {
		ms := a.FinishedAt.Sub(a.StartedAt).Milliseconds()
		a.DurationMS = &ms
	}
	return a
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
