package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
)

// Status is one engine's row of the schedule, as the console shows it.
type Status struct {
	Step string `json:"step"`
	Name string `json:"name"`
	Kind string `json:"kind"`
	Limits
	Load
	Health
	// The schedule's own times, which settle and blocked read: the quota
	// window's start, the cool-down's and the breaker's ends.
	windowStart, cooledUntil, breakerUntil time.Time
}

// Load is what an engine serves: its quota used in the current window and
// left (-1: no quota), the calls in flight, and when it can take the next
// (the latest of the rate's slot, a cool-down and the breaker).
//
// Replicas serve calls from leases (lease.go): Used counts the units spent
// and those the replicas' leases hold for calls to come; Leased is that
// part, as of each holder's last batch (at most what is still unspent).
// InFlight counts the slots held: the calls running and the slots replicas
// keep between calls (about a lease term while they are busy, the idle
// time once idle: LeaseTerm and LeaseIdle, grown with a slow engine's call
// time up to LeaseScaleMax).
type Load struct {
	Used     int64     `json:"quota_used"`
	Left     int64     `json:"quota_left"`
	Leased   int64     `json:"quota_leased"`
	InFlight int       `json:"in_flight"`
	NextAt   time.Time `json:"next_available_at"`
}

// Health is how an engine answers: its calls, its server errors in a row
// (Failures) and in all, the last error, and its breaker: closed, open or
// half_open (open time passed, failures not yet cleared by a success).
type Health struct {
	Calls       int64      `json:"calls"`
	Failures    int        `json:"failures"`
	Errors      int64      `json:"errors"`
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
	Breaker     string     `json:"breaker"`
}

// Read returns the schedule's rows (of step; every step when ""), as seen
// at now with the quota window starting at windowStart (nil: each row's own
// window, as the console sees it).
func Read(ctx context.Context, q store.Querier, step string, now time.Time, windowStart func(time.Time) time.Time) ([]Status, error) {
	rows, err := q.Query(ctx, `SELECT step, name, kind, weight, rpm, concurrency, daily_quota, fallback, window_start, used,
		(SELECT coalesce(sum(r.units), 0) FROM engine_reservations r WHERE r.step = e.step AND r.name = e.name AND r.owner <> ''),
		in_flight, next_available_at, cooled_until, breaker_until, failures, errors, calls, last_error, last_error_at
		FROM engine_schedule e WHERE $1 = '' OR step = $1 ORDER BY step, fallback, name`, step)
	if err != nil {
		return nil, fmt.Errorf("read engine schedule: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Status, error) {
		var s Status
		err := row.Scan(&s.Step, &s.Name, &s.Kind, &s.Weight, &s.RPM, &s.Concurrency, &s.DailyQuota, &s.Fallback,
			&s.windowStart, &s.Used, &s.Leased, &s.InFlight, &s.NextAt, &s.cooledUntil, &s.breakerUntil, &s.Failures, &s.Errors,
			&s.Calls, &s.LastError, &s.LastErrorAt)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read engine schedule: %w", err)
	}
	for i := range out {
		out[i].settle(now, windowStart)
	}
	return out, nil
}

// settle derives the fields that depend on the clock.
func (s *Status) settle(now time.Time, windowStart func(time.Time) time.Time) {
	if windowStart != nil && s.windowStart.Before(windowStart(now)) {
		s.Used, s.Leased = 0, 0
	}
	s.Left = -1
	if s.DailyQuota > 0 {
		s.Left = max(s.DailyQuota-s.Used, 0)
	}
	s.NextAt = latest(s.NextAt, s.cooledUntil, s.breakerUntil, now)
	switch {
	case s.breakerUntil.After(now):
		s.Breaker = "open"
	case s.Failures >= BreakerFailures:
		s.Breaker = "half_open"
	default:
		s.Breaker = "closed"
	}
}

// latest is the latest of times.
func latest(times ...time.Time) time.Time {
	var l time.Time
	for _, t := range times {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// blocked says why and until when the engine cannot take a call of units
// at now ("" when it can), given the window's next reset.
func (s Status) blocked(now, nextReset time.Time, units int64) (string, time.Time) {
	switch {
	case s.DailyQuota > 0 && s.Used-s.Leased+units <= s.DailyQuota && s.Used+units > s.DailyQuota:
		// Replicas' leases hold the units: they are spent or given back
		// within a lease's term.
		return "rate_limit", now.Add(DefaultLeaseTerm)
	case s.DailyQuota > 0 && s.Used+units > s.DailyQuota:
		return "no_quota", nextReset
	case !s.cooledUntil.Before(nextReset):
		return "no_quota", s.cooledUntil // the engine said its quota is spent
	case s.breakerUntil.After(now):
		return "no_engine", s.breakerUntil
	case s.NextAt.After(now):
		return "rate_limit", s.NextAt
	case s.Concurrency > 0 && s.InFlight >= s.Concurrency:
		return "rate_limit", now.Add(time.Second)
	}
	return "", time.Time{}
}
