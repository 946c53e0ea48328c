package step

import (
	"context"
	"errors"
	"fmt"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
)

// now is the clock of the decision table.
var now = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// testPolicy is the services' policy: 3 retries after 1s, 2s, 4s; a 30s
// lease; a message waits an hour for its predecessor; 20 hand-backs.
var testPolicy = policy{
	maxRetries:     3,
	backoff:        func(n int) time.Duration { return time.Second << min(n-1, 6) },
	lease:          30 * time.Second,
	dependencyWait: time.Hour,
	deliveryLimit:  20,
}

// claimed is a message of attempt n whose attempt this worker claimed.
func claimed(n int) facts {
	return facts{Now: now, Step: wire.StepASR, Timeout: 10 * time.Minute, Attempt: n,
		CreatedAt: now.Add(-time.Minute), Claim: claimClaimed, BaseAttempt: 1}
}

// ran is attempt n after its handler returned err.
func ran(n int, err error) facts {
	f := claimed(n)
	f.Ran, f.Err = true, err
	return f
}

// recorded is attempt n after its first commit of outcome found c (err).
func recorded(n int, outcome recOutcome, c commitResult, err error) facts {
	var herr error
	if outcome != recSucceeded {
		herr = errors.New("boom")
	}
	f := ran(n, herr)
	f.Commits, f.Recorded, f.Commit, f.CommitErr = 1, outcome, c, err
	return f
}

// with changes a copy of f.
func with(f facts, change func(*facts)) facts {
	change(&f)
	return f
}

var errDown = errors.New("connection refused")

// TestDecide is the decision table: what the runner does with a delivery,
// one row one decision.
func TestDecide(t *testing.T) {
	t.Parallel()
	transient := errors.New("speech engine: connection reset")
	for _, tc := range []struct {
		name string
		f    facts
		want decision
		// reason is a text the decision's error must contain.
		reason string
	}{
		// Read and claimed.
		{"an invalid message is dead-lettered", facts{Now: now, Invalid: errors.New("invalid message: no task_id")},
			decision{Action: actReject, Class: wire.ClassInvalid, Metric: "rejected"}, "no task_id"},
		{"a failed claim hands back", with(claimed(1), func(f *facts) { f.Claim, f.ClaimErr = claimFailed, errDown }),
			decision{Action: actHandBack, Back: backClaimError, Metric: "claim_error"}, "refused"},
		{"a part that succeeded before is skipped", with(claimed(1), func(f *facts) { f.Claim = claimDone }),
			decision{Action: actAck, Metric: "duplicate"}, ""},
		{"an attempt that ended before is skipped", with(claimed(2), func(f *facts) { f.Claim = claimFinished }),
			decision{Action: actAck, Metric: "duplicate"}, ""},
		{"a fresh message waits for its predecessor 1s", with(claimed(1), func(f *facts) { f.Claim, f.CreatedAt = claimWaiting, now.Add(-2*time.Second) }),
			decision{Action: actLater, Back: backPredecessor, Delay: time.Second, Metric: "waiting"}, ""},
		{"a message waiting 2m is checked a quarter of its age (30s) later", with(claimed(1), func(f *facts) { f.Claim, f.CreatedAt = claimWaiting, now.Add(-2*time.Minute) }),
			decision{Action: actLater, Back: backPredecessor, Delay: 30 * time.Second, Metric: "waiting"}, ""},
		{"an old waiting message is checked once a minute", with(claimed(1), func(f *facts) { f.Claim, f.CreatedAt = claimWaiting, now.Add(-59*time.Minute) }),
			decision{Action: actLater, Back: backPredecessor, Delay: time.Minute, Metric: "waiting"}, ""},
		{"waiting past the dependency wait is dead-lettered", with(claimed(1), func(f *facts) {
			f.Claim, f.After, f.CreatedAt = claimWaiting, "extract_audio", now.Add(-61*time.Minute)
		}),
			decision{Action: actReject, Class: wire.ClassPermanent, Metric: "rejected"}, "still waits for extract_audio after 1h1m0s"},
		{"a part held by another attempt is checked when its lease ends", with(claimed(2), func(f *facts) { f.Claim, f.HeldUntil = claimHeld, now.Add(12*time.Second) }),
			decision{Action: actLater, Back: backHeld, Delay: 12 * time.Second, Held: true, Metric: "held"}, ""},
		{"a lease ending now is checked 1s later", with(claimed(2), func(f *facts) { f.Claim, f.HeldUntil = claimHeld, now.Add(-time.Second) }),
			decision{Action: actLater, Back: backHeld, Delay: time.Second, Held: true, Metric: "held"}, ""},
		{"a held part is checked at least once a lease", with(claimed(2), func(f *facts) { f.Claim, f.HeldUntil = claimHeld, now.Add(5*time.Minute) }),
			decision{Action: actLater, Back: backHeld, Delay: 30 * time.Second, Held: true, Metric: "held"}, ""},
		{"a part held as long as a step may run is checked again", with(claimed(2), func(f *facts) {
			f.Claim, f.HeldUntil, f.HeldSince = claimHeld, now.Add(10*time.Second), now.Add(-11*time.Minute-30*time.Second)
		}), decision{Action: actLater, Back: backHeld, Delay: 10 * time.Second, Held: true, Metric: "held"}, ""},
		{"a part held longer than a step may run is dead-lettered", with(claimed(2), func(f *facts) {
			f.Claim, f.HeldUntil, f.HeldSince = claimHeld, now.Add(10*time.Second), now.Add(-11*time.Minute-31*time.Second)
		}), decision{Action: actReject, Class: wire.ClassTransient, Metric: "rejected"}, "longer than a step may run (11m30s)"},
		{"a claimed step runs", claimed(1), decision{Action: actRun}, ""},
		// An outage of a service the step needs spends no retry.
		{"an unavailable store hands back without spending a retry", ran(4, fault.Unavailable(errDown)),
			decision{Action: actHandBack, Back: backUnavailable, Release: true, Metric: "unavailable"}, "connection refused"},
		{"an unavailable store at the last delivery the limit allows uses the retries", with(ran(1, fault.Unavailable(errDown)), func(f *facts) { f.HandBacks = 19 }),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: time.Second, Metric: recRetried}, "connection refused"},
		{"an unavailable store with the budget spent at the limit is dead-lettered", with(ran(4, fault.Unavailable(errDown)), func(f *facts) { f.HandBacks = 19 }),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassTransient, Retries: 3, Metric: recDeadLettered}, "retried 3 times"},
		{"permanent wins over unavailable", ran(1, fault.Permanent(fault.Unavailable(errDown))),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassPermanent, Metric: recDeadLettered}, "connection refused"},
		{"a step handed back below the limit runs", with(claimed(1), func(f *facts) { f.HandBacks = 19 }), decision{Action: actRun}, ""},
		{"a step handed back up to the limit is dead-lettered", with(claimed(1), func(f *facts) { f.HandBacks = 20 }),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassPermanent, Metric: recDeadLettered}, "handed back 20 times"},
		{"an unknown claim outcome hands back", with(claimed(1), func(f *facts) { f.Claim = claimUnknown }),
			decision{Action: actHandBack, Back: backUnknownClaim}, ""},
		{"a message of a task cancelled or failed is acked, neither retried nor dead-lettered", with(claimed(3), func(f *facts) { f.Claim = claimEnded }),
			decision{Action: actAck, Metric: "ended"}, ""},

		// Ran.
		{"success is recorded with what the handler staged", ran(1, nil),
			decision{Action: actRecord, Record: recSucceeded, Staged: true, Metric: recSucceeded}, ""},
		{"Park is recorded with what the handler staged", ran(1, fault.Park(errors.New("no voice for xx"))),
			decision{Action: actRecord, Record: recParked, Staged: true, Metric: recParked}, "no voice"},
		{"Park wins over Permanent", ran(1, fault.Park(fault.Permanent(errors.New("compensate")))),
			decision{Action: actRecord, Record: recParked, Staged: true, Metric: recParked}, "compensate"},
		{"a transient error retries after 1s", ran(1, transient),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: time.Second, Metric: recRetried}, "reset"},
		{"the third try retries after 4s", ran(3, transient),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: 4 * time.Second, Metric: recRetried}, "reset"},
		{"the fourth try has used the budget", ran(4, transient),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassTransient, Retries: 3, Metric: recDeadLettered}, "(retried 3 times)"},
		{"a re-driven part has a fresh budget", with(ran(6, transient), func(f *facts) { f.BaseAttempt = 5 }),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: 2 * time.Second, Metric: recRetried}, "reset"},
		{"a permanent error is dead-lettered at once", ran(1, fault.Permanent(errors.New("no audio stream"))),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassPermanent, Metric: recDeadLettered}, "no audio stream"},
		{"RetryAfter longer than the backoff sets the delay", ran(1, fault.RetryAfter(transient, 90*time.Second)),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: 90 * time.Second, Metric: recRetried}, "reset"},
		{"RetryAfter shorter than the backoff keeps the backoff", ran(3, fault.RetryAfter(transient, time.Second)),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: 4 * time.Second, Metric: recRetried}, "reset"},
		{"RetryAfter past the budget is dead-lettered", ran(4, fault.RetryAfter(transient, time.Second)),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassTransient, Retries: 3, Metric: recDeadLettered}, "(retried 3 times)"},
		{"no engine free waits until the pool can serve, past the budget too", ran(9, fault.Wait(transient, fault.WaitNoQuota, now.Add(3*time.Hour))),
			decision{Action: actRecord, Record: recWaited, Delay: 3 * time.Hour, Metric: recWaited}, "reset"},
		{"a wait already due is re-offered after a second", ran(1, fault.Wait(transient, fault.WaitRateLimit, now.Add(-time.Minute))),
			decision{Action: actRecord, Record: recWaited, Delay: time.Second, Metric: recWaited}, "reset"},
		{"a wait below the bound on waits waits", with(ran(12, fault.Wait(transient, fault.WaitRateLimit, now.Add(time.Minute))), func(f *facts) {
			f.BaseAttempt, f.Waits, f.MaxWaits = 10, 9, 10
		}), decision{Action: actRecord, Record: recWaited, Delay: time.Minute, Metric: recWaited}, "reset"},
		{"the wait after the last one the bound allows is dead-lettered with the reason", with(ran(12, fault.Wait(transient, fault.WaitNoQuota, now.Add(time.Hour))), func(f *facts) {
			f.BaseAttempt, f.Waits, f.MaxWaits = 11, 10, 10
		}), decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassTransient, Retries: 1, Metric: recDeadLettered},
			"no engine could serve the step after 10 waits (the last no_quota until 2026-11-23T11:00:00Z): speech engine"},
		{"no bound known: the wait waits", with(ran(30, fault.Wait(transient, fault.WaitNoEngine, now.Add(time.Minute))), func(f *facts) {
			f.BaseAttempt, f.Waits = 29, 28
		}), decision{Action: actRecord, Record: recWaited, Delay: time.Minute, Metric: recWaited}, "reset"},
		{"a permanent mark wins over a wait", ran(1, fault.Permanent(fault.Wait(transient, fault.WaitNoEngine, now))),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassPermanent, Metric: recDeadLettered}, "reset"},
		{"a timeout retries", ran(1, fmt.Errorf("step asr timed out after 10m0s: %w", context.DeadlineExceeded)),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTimeout, Delay: time.Second, Metric: recRetried}, "timed out"},
		{"a panic retries", ran(1, panicError("index out of range")),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: time.Second, Metric: recRetried}, "handler panic: index out of range"},
		{"a lease lost during the step acks: another worker owns the attempt", with(ran(1, context.Canceled), func(f *facts) { f.Lost = leaseLost }),
			decision{Action: actAck, Metric: "lease_lost"}, ""},
		{"a claim lost during the step hands back, never acks", with(ran(1, context.Canceled), func(f *facts) { f.Lost = claimLost }),
			decision{Action: actHandBack, Back: backClaimLost, Metric: "claim_lost"}, ""},
		{"a step cut short by shutdown hands back and frees its lease", with(ran(1, context.Canceled), func(f *facts) { f.Interrupted = true }),
			decision{Action: actHandBack, Back: backShutdown, Release: true, Metric: "handed_back"}, "canceled"},
		{"a step whose task was cancelled while it ran is closed, not retried", with(ran(1, context.Canceled), func(f *facts) { f.Stopped = "cancelled" }),
			decision{Action: actRecord, Record: recRefused, Metric: recRefused}, "task cancelled while the step ran"},
		{"a step whose task failed while it ran is closed even if it succeeded", with(ran(1, nil), func(f *facts) { f.Stopped = "failed" }),
			decision{Action: actRecord, Record: recRefused, Metric: recRefused}, "task failed while the step ran"},
		{"a stopped task wins over a shutdown", with(ran(2, context.Canceled), func(f *facts) { f.Stopped, f.Interrupted = "cancelled", true }),
			decision{Action: actRecord, Record: recRefused, Metric: recRefused}, "task cancelled"},
		{"a stopped task at the last try is still not dead-lettered", with(ran(4, fault.Permanent(errors.New("x"))), func(f *facts) { f.Stopped = "cancelled" }),
			decision{Action: actRecord, Record: recRefused, Metric: recRefused}, "task cancelled"},

		// Committed.
		{"committed and published acks", recorded(1, recSucceeded, committed, nil), decision{Action: actAck}, ""},
		{"committed but not published hands back (the sweep publishes)", with(recorded(1, recSucceeded, committed, nil), func(f *facts) { f.PublishErr = errDown }),
			decision{Action: actHandBack, Back: backPublish}, "refused"},
		{"a failing commit is recorded as a failed try", recorded(1, recSucceeded, commitFailed, errors.New("staged statement: syntax error")),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: time.Second, Metric: "commit_error"}, "commit succeeded outcome: staged statement"},
		{"a commit that keeps failing ends in the DLQ", recorded(4, recSucceeded, commitFailed, errors.New("staged statement: syntax error")),
			decision{Action: actRecord, Record: recDeadLettered, Class: wire.ClassTransient, Retries: 3, Metric: "commit_error"}, "(retried 3 times)"},
		{"a commit the database went away under hands back without spending a retry", recorded(1, recSucceeded, commitFailed, fault.Unavailable(errDown)),
			decision{Action: actHandBack, Back: backUnavailable, Release: true, Metric: "unavailable"}, "refused"},
		{"a commit outage at the last delivery the limit allows is recorded as a failed try", with(recorded(1, recSucceeded, commitFailed, fault.Unavailable(errDown)), func(f *facts) { f.HandBacks = 19 }),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: time.Second, Metric: "commit_error"}, "refused"},
		{"a claim lost at the commit is recorded as a failed try first", recorded(1, recRetried, commitClaimLost, errors.New("step claim lost")),
			decision{Action: actRecord, Record: recRetried, Class: wire.ClassTransient, Delay: time.Second, Metric: "commit_error"}, "commit retried outcome"},
		{"a claim lost at the second commit hands back, never acks", with(recorded(1, recRetried, commitClaimLost, errors.New("step claim lost")), func(f *facts) { f.Commits = 2 }),
			decision{Action: actHandBack, Back: backClaimLost, Metric: "claim_lost"}, "claim lost"},
		{"a second commit failing (the database is down) hands back and frees the lease", with(recorded(1, recRetried, commitFailed, errDown), func(f *facts) { f.Commits = 2 }),
			decision{Action: actHandBack, Back: backCommit, Release: true}, "refused"},
		{"an outcome settled elsewhere acks", recorded(1, recSucceeded, commitSettled, errors.New("step lease lost")),
			decision{Action: actAck, Metric: "lease_lost"}, "lease lost"},
		{"a stopped step closed acks", recorded(1, recRefused, committed, nil), decision{Action: actAck}, ""},
		{"a stopped step whose close fails hands back with its lease freed", recorded(1, recRefused, commitFailed, errDown),
			decision{Action: actHandBack, Back: backCommit, Release: true}, "refused"},
		{"a stopped step whose close finds the database gone hands back", recorded(1, recRefused, commitFailed, fault.Unavailable(errDown)),
			decision{Action: actHandBack, Back: backUnavailable, Release: true, Metric: "unavailable"}, "refused"},
		{"a stopped step whose claim row is gone hands back, never acks", recorded(1, recRefused, commitClaimLost, errors.New("step claim lost")),
			decision{Action: actHandBack, Back: backCommit, Release: true}, "claim lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testPolicy.decide(tc.f)
			if g, w := shape(got), shape(tc.want); g != w {
				t.Errorf("decide = %s\n           want %s", g, w)
			}
			text := ""
			if got.Err != nil {
				text = got.Err.Error() + " | " + got.Reason
			}
			if !strings.Contains(text, tc.reason) {
				t.Errorf("error %q, want it to contain %q", text, tc.reason)
			}
			if got.Why == "" && got.Metric != "" {
				t.Errorf("decision counted as %s is not logged", got.Metric)
			}
		})
	}
}

// shape prints what a decision does, leaving out its texts.
func shape(d decision) string {
	return fmt.Sprintf("{action %d record %q staged %v class %q retries %d delay %s held %v release %v back %q metric %q}",
		d.Action, d.Record, d.Staged, d.Class, d.Retries, d.Delay, d.Held, d.Release, d.Back, d.Metric)
}

// TestEveryDeliveryEnds plays every path through decide, answering each
// run and commit with every result, and checks that each ends in an ack, a
// hand-back, a delay or a dead letter within a run and two commits.
func TestEveryDeliveryEnds(t *testing.T) {
	t.Parallel()
	claims := []claimResult{claimFailed, claimClaimed, claimDone, claimFinished, claimWaiting, claimHeld, claimEnded, claimUnknown}
	results := []facts{
		{Err: nil}, {Err: errors.New("x")}, {Err: fault.Permanent(errors.New("x"))}, {Err: fault.Park(errors.New("x"))}, {Err: fault.Wait(errors.New("x"), fault.WaitNoQuota, time.Time{})},
		{Err: context.Canceled, Lost: leaseLost}, {Err: context.Canceled, Lost: claimLost}, {Err: context.Canceled, Interrupted: true},
		{Err: context.Canceled, Stopped: "cancelled"}, {Err: nil, Stopped: "failed"},
	}
	commits := []commitResult{committed, commitSettled, commitClaimLost, commitFailed}
	for _, c := range claims {
		for _, res := range results {
			for _, c1 := range commits {
				for _, c2 := range commits {
					for _, pubFails := range []bool{false, true} {
						for _, attempt := range []int{1, 4} {
							f := with(claimed(attempt), func(f *facts) { f.Claim = c })
							play(t, f, res, []commitResult{c1, c2}, pubFails)
						}
					}
				}
			}
		}
	}
}

func play(t *testing.T, f facts, res facts, commits []commitResult, pubFails bool) {
	t.Helper()
	for step := 0; step < 4; step++ {
		d := testPolicy.decide(f)
		switch d.Action {
		case actRun:
			if f.Ran {
				t.Fatalf("%+v: runs twice", f)
			}
			f.Ran, f.Err, f.Lost, f.Interrupted, f.Stopped = true, res.Err, res.Lost, res.Interrupted, res.Stopped
		case actRecord:
			if f.Commits == len(commits) {
				t.Fatalf("%+v: commits a third time", f)
			}
			f.Recorded, f.Commit = d.Record, commits[f.Commits]
			f.Commits++
			if f.Commit != committed {
				f.CommitErr = errors.New("commit: " + strconv.Itoa(int(f.Commit)))
			} else if pubFails {
				f.PublishErr = errDown
			}
		case actAck, actLater, actReject, actHandBack:
			if f.Lost == claimLost && d.Action == actAck || f.Commit == commitClaimLost && d.Action == actAck {
				t.Fatalf("%+v: a lost claim acked", f)
			}
			return
		default:
			t.Fatalf("%+v: no action", f)
		}
	}
	t.Fatalf("%+v: no end after a run and two commits", f)
}

// TestDeadLetterReasonsCountRetriesTruly: a dead letter's reason says how
// often the step was really retried, whatever the budget.
func TestDeadLetterReasonsCountRetriesTruly(t *testing.T) {
	t.Parallel()
	transient := errors.New("engine down")
	for retries, want := range map[int]string{0: "engine down (not retried)", 1: "engine down (retried once)", 3: "engine down (retried 3 times)"} {
		p := testPolicy
		p.maxRetries = retries
		d := p.decide(ran(retries+1, transient))
		if d.Record != recDeadLettered || d.Reason != want || d.Retries != retries {
			t.Errorf("budget %d: %s %q (retries %d), want dead-lettered %q", retries, d.Record, d.Reason, d.Retries, want)
		}
	}
}

func TestHandBackPause(t *testing.T) {
	t.Parallel()
	for n, want := range map[int32]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		6: 30 * time.Second, 7: 30 * time.Second, 1000: 30 * time.Second} {
		if got := handBackPause(n); got != want {
			t.Errorf("handBackPause(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestDecideDoesNoIO: the decisions import nothing that talks to the
// outside world; the runner carries them out.
func TestDecideDoesNoIO(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "decide.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"errors": true, "fmt": true, "time": true, "github.com/dubflow/dubflow/pkg/wire": true,
		"github.com/dubflow/dubflow/pkg/fault": true}
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); !allowed[path] {
			t.Errorf("decide.go imports %s", path)
		}
	}
}

// TestOutcomesArePkgAttempts: the outcomes decide records are the ones
// pkg/attempt carries out, with the status each ends the attempt with.
func TestOutcomesArePkgAttempts(t *testing.T) {
	t.Parallel()
	for rec, want := range map[recOutcome]struct {
		outcome attempt.Outcome
		status  string
	}{
		recSucceeded:    {attempt.Succeeded, attempt.StatusSucceeded},
		recParked:       {attempt.Parked, attempt.StatusParked},
		recRetried:      {attempt.Retried, attempt.StatusFailed},
		recDeadLettered: {attempt.DeadLettered, attempt.StatusFailed},
		recWaited:       {attempt.Waited, attempt.StatusFailed},
		recRefused:      {attempt.Refused, attempt.StatusFailed},
	} {
		if got := attempt.Outcome(rec); got != want.outcome || got.Status() != want.status {
			t.Errorf("outcome %q ends with status %q, want attempt's %q ending %q", rec, got.Status(), want.outcome, want.status)
		}
	}
}
