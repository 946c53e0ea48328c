package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
)

// Pool chooses an engine of a step's pool for each call.
type Pool struct {
	Sched *Schedule
	// Metrics counts calls and waits (nil: none).
	Metrics *Metrics
	// LocalWait is how soon a slot must be for a call to wait for it in
	// place instead of the step waiting (DefaultLocalWait when zero).
	LocalWait time.Duration
}

// DefaultLocalWait: a call waits in place for a slot this close.
const DefaultLocalWait = 2 * time.Second

// localBudget bounds the time one call waits in place in all.
const localBudget = 30 * time.Second

// errRace: the engine the snapshot saw free was taken meanwhile.
var errRace = errors.New("engine taken meanwhile")

// Do runs call on an engine of the pool for a call of units (the step's
// unit): the best engine free now; on a 429 or a spent quota the engine
// cools down and the next one is tried, on a server error the breaker
// counts and the next one is tried. When no engine can serve, Do returns
// fault.Wait with the reason and the time the pool can serve again. A call
// whose context ended (its step stopped: the task was cancelled or failed,
// the step timed out, the worker stops) reserves nothing more.
//
// The engines a call may use are its task's project's (ForProject) first,
// then, when the project allows it, the shared ones; a call without a
// project uses the shared ones only.
func (p *Pool) Do(ctx context.Context, units int64, call func(ctx context.Context, engine string) error) error {
	project, shared := scopeOf(ctx)
	own, common := p.split(project)
	if len(own) == 0 {
		if !shared {
			return fault.Wait(fmt.Errorf("%s pool: project %s has no engine of its own and may not use the shared ones",
				p.Sched.Step, project), fault.WaitNoEngine, p.Sched.now().Add(time.Minute))
		}
		return p.among(ctx, units, common, call)
	}
	err := p.among(ctx, units, own, call)
	if _, _, waiting := fault.WaitOf(err); waiting && shared && len(common) > 0 {
		return p.among(ctx, units, common, call) // the project's own engines cannot serve now
	}
	return err
}

// among is Do over the engines in set only.
func (p *Pool) among(ctx context.Context, units int64, set map[string]bool, call func(ctx context.Context, engine string) error) error {
	tried := map[string]bool{}
	for _, m := range p.Sched.Cfg.Engines {
		if !set[m.Name] {
			tried[m.Name] = true // not this call's
		}
	}
	everyone := p.untried(tried)
	var last error
	var waited time.Duration
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("%s pool: %w", p.Sched.Step, context.Cause(ctx))
		}
		cands := p.untried(tried)
		if len(cands) == 0 {
			return p.wait(ctx, everyone, units, last, true)
		}
		res, ok, err := p.take(cands, units)
		if err != nil {
			return fault.Unavailable(err)
		}
		if !ok {
			werr := p.wait(ctx, cands, units, last, false)
			if errors.Is(werr, errRace) {
				// An engine was freed or taken between the reservation and the read.
				werr = fault.Wait(fmt.Errorf("%s pool: every free engine taken", p.Sched.Step), fault.WaitRateLimit, p.Sched.now().Add(time.Duration(1+rand.IntN(4))*time.Millisecond))
			}
			_, until, waiting := fault.WaitOf(werr)
			d := max(until.Sub(p.Sched.now()), time.Millisecond)
			if !waiting || d > p.localWait() || waited+d > localBudget {
				return werr
			}
			waited += d
			if err := sleep(ctx, d); err != nil {
				return err
			}
			continue
		}
		next, err := p.run(ctx, res, call)
		if !next {
			return err
		}
		tried[res.Engine], last = true, err
	}
}

// take reserves the best of cands for a call of units.
func (p *Pool) take(cands []string, units int64) (Reservation, bool, error) {
	return p.Sched.reserve(cands, units, p.localWait())
}

// run makes the call on the reserved engine and reports it to the
// schedule; next says the call should move to the next engine.
func (p *Pool) run(ctx context.Context, res Reservation, call func(ctx context.Context, engine string) error) (bool, error) {
	if err := sleep(ctx, res.At.Sub(p.Sched.now())); err != nil {
		_ = p.Sched.release(res, result{refund: true, neutral: true})
		return false, err
	}
	err := call(ctx, res.Engine)
	r, next := p.classify(ctx, err)
	p.Metrics.call(p.Sched.Step, res.Engine, r)
	// A release that fails (the database away) leaves the reservation to
	// expire; the call's result stands either way.
	_ = p.Sched.release(res, r)
	if err != nil {
		err = fmt.Errorf("%s engine %s: %w", p.Sched.Step, res.Engine, err)
	}
	return next, err
}

// classify turns a call's error into what the schedule records, and
// whether the call moves to the next engine.
func (p *Pool) classify(ctx context.Context, err error) (result, bool) {
	now := p.Sched.now()
	var herr *speech.HTTPError
	switch {
	case err == nil:
		return result{ok: true}, false
	case ctx.Err() != nil:
		// Cut short by the step: not the engine's fault. When the task
		// stopped (cancelled or failed), the call's result is thrown away
		// and its units are given back: no quota is spent on an ended task.
		return result{neutral: true, refund: errors.Is(context.Cause(ctx), fault.ErrTaskStopped)}, false
	case errors.As(err, &herr) && quotaSpent(herr):
		next := p.Sched.Cfg.WindowStart(now).AddDate(0, 0, 1)
		return result{refund: true, coolUntil: next, errText: err.Error()}, true
	case errors.As(err, &herr) && herr.StatusCode == http.StatusTooManyRequests:
		d, ok := fault.RetryAfterHint(err)
		if !ok || d <= 0 {
			d = time.Minute
		}
		return result{refund: true, coolUntil: now.Add(d), errText: err.Error()}, true
	case fault.IsPermanent(err):
		return result{errText: err.Error()}, false
	default: // 5xx, 408, a timeout, a refused connection, an embedded engine's crash
		return result{refund: true, failure: true, errText: err.Error()}, true
	}
}

// quotaSpent reports whether an engine's answer says its quota is spent
// (402, or a 429 whose body names the quota).
func quotaSpent(e *speech.HTTPError) bool {
	body := strings.ToLower(e.Body)
	return e.StatusCode == http.StatusPaymentRequired ||
		(e.StatusCode == http.StatusTooManyRequests && (strings.Contains(body, "quota") || strings.Contains(body, "insufficient")))
}

// wait reads the schedule of cands and returns the fault.Wait saying why
// none can serve a call of units and until when; errRace when one can
// (it was taken or freed meanwhile) and all is false. last is the error
// of the last engine tried.
func (p *Pool) wait(ctx context.Context, cands []string, units int64, last error, all bool) error {
	now := p.Sched.now()
	rows, err := Read(ctx, p.Sched.DB, p.Sched.Step, now, p.Sched.Cfg.WindowStart)
	if err != nil {
		return fault.Unavailable(err)
	}
	in := map[string]bool{}
	for _, c := range cands {
		in[c] = true
	}
	nextReset := p.Sched.Cfg.WindowStart(now).AddDate(0, 0, 1)
	reason, until := fault.WaitNoEngine, now.Add(time.Minute)
	found := false
	for _, s := range rows {
		if !in[s.Name] {
			continue
		}
		why, at := s.blocked(now, nextReset, units)
		if why == "" {
			if !all {
				return errRace
			}
			why, at = fault.WaitNoEngine, now.Add(5*time.Second) // every engine failed this call
		}
		if !found || at.Before(until) {
			reason, until, found = why, at, true
		}
	}
	p.Metrics.wait(p.Sched.Step, reason)
	msg := fmt.Sprintf("%s pool: no engine can serve (%s) until %s", p.Sched.Step, reason, until.UTC().Format(time.RFC3339))
	if last != nil {
		return fault.Wait(fmt.Errorf("%s; last: %w", msg, last), reason, until)
	}
	return fault.Wait(errors.New(msg), reason, until)
}

func (p *Pool) localWait() time.Duration {
	if p.LocalWait > 0 {
		return p.LocalWait
	}
	return DefaultLocalWait
}

// split returns the engines of project (none for "") and the shared ones.
func (p *Pool) split(project string) (own, common map[string]bool) {
	own, common = map[string]bool{}, map[string]bool{}
	for _, m := range p.Sched.Cfg.Engines {
		switch m.Project {
		case "":
			common[m.Name] = true
		case project:
			if project != "" {
				own[m.Name] = true
			}
		}
	}
	return own, common
}

// scopeKey keys a call's project in its context.
type scopeKey struct{}

type scope struct {
	project string
	shared  bool
}

// ForProject returns ctx for the calls of a task of project: they use the
// project's own engines first, and the shared ones only when shared.
func ForProject(ctx context.Context, project string, shared bool) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope{project: project, shared: shared})
}

// scopeOf is ctx's project and whether it may use the shared engines (a
// context without one: no project, shared engines).
func scopeOf(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(scopeKey{}).(scope)
	if !ok {
		return "", true
	}
	return s.project, s.shared
}

func (p *Pool) untried(tried map[string]bool) []string {
	var out []string
	for _, m := range p.Sched.Cfg.Engines {
		if !tried[m.Name] {
			out = append(out, m.Name)
		}
	}
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	<-wait.Done()
	return ctx.Err()
}
