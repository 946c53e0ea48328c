package step

// This file decides what the runner does with a delivery. It is pure: the
// runner gathers the facts (what it read, claimed, ran, committed and
// published) and the time, decide answers with the next action, the runner
// carries it out and asks again, until an action ends the delivery. Nothing
// here does I/O or reads the clock; decide_test.go holds the decision table.

import (
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/wire"
)

// action is what the runner does next with a delivery.
type action uint8

const (
	// actRun runs the handler, then asks again.
	actRun action = iota + 1
	// actRecord commits the attempt's outcome (decision.Record) and
	// publishes the messages it added, then asks again.
	actRecord
	// actAck acknowledges the delivery: nothing is left to do.
	actAck
	// actLater republishes the message through a delay tier (decision.Delay)
	// and acks it.
	actLater
	// actReject dead-letters the message at once, without a step row,
	// fails its task and acks it.
	actReject
	// actHandBack returns the message to its queue after a pause.
	actHandBack
)

// claimResult is what claiming the message's attempt found.
type claimResult uint8

const (
	claimFailed   claimResult = iota + 1 // the claim statement failed (the database is unreachable)
	claimClaimed                         // this worker holds the attempt's lease
	claimDone                            // the part already succeeded
	claimFinished                        // this attempt already failed or was parked
	claimWaiting                         // the predecessor step has not succeeded yet
	claimHeld                            // another live worker holds an attempt of the part
	claimEnded                           // the task's work stopped: it was cancelled or failed
	claimUnknown                         // an outcome this runtime does not know
)

// loss is what the heartbeat found while the step ran.
type loss int32

const (
	leaseHeld loss = iota // the lease held
	leaseLost             // another worker took the attempt over
	claimLost             // the claim row is gone (a database crash)
)

// commitResult is what committing an outcome found.
type commitResult uint8

const (
	committed       commitResult = iota + 1
	commitSettled                // the outcome is decided elsewhere: the lease was lost, or the part succeeded before
	commitClaimLost              // the claim row is gone: nobody holds the attempt
	commitFailed                 // any other failure: a staged statement, the database unreachable
)

// recOutcome is how a claimed attempt ends: one of pkg/attempt's
// Outcomes, which attempt.Finish carries out. decide.go imports nothing
// that does I/O, so the values are repeated here (untyped, so that they
// also name the metrics); TestOutcomesArePkgAttempts keeps them equal.
type recOutcome string

// Outcomes an attempt is recorded with (also metric labels).
const (
	recSucceeded    = "succeeded"
	recParked       = "parked"
	recRetried      = "retried"
	recDeadLettered = "dead_lettered"
	// recWaited: no engine could serve the step (fault.Wait); the attempt
	// ends waiting with its reason and time, and a delay tier re-offers the
	// step then without spending a retry.
	recWaited = "waited"
	// recRefused: the task's work stopped while the step ran (it was
	// cancelled or failed); the attempt ends failed, nothing it staged is
	// committed, and the message is acked without retry or dead letter.
	recRefused = "refused"
)

// facts is what the runner knows about a delivery when it asks decide. Each
// stage adds its own: read and claimed, ran, committed.
type facts struct {
	// Now is the runner's clock at the question.
	Now time.Time

	// Invalid says why the message cannot be served here (undecodable, no
	// route for its step, no part name); nothing else is known then.
	Invalid error
	// Step, After and Timeout are the route's.
	Step, After string
	Timeout     time.Duration
	// Attempt and CreatedAt are the envelope's.
	Attempt   int
	CreatedAt time.Time
	// HandBacks counts the hand-backs so far, across the delay tiers.
	HandBacks int
	// HeldSince is when the message was first found held by another
	// attempt (zero: never).
	HeldSince time.Time

	Claim       claimResult
	ClaimErr    error     // with claimFailed
	HeldUntil   time.Time // with claimHeld: when the holder's lease ends
	BaseAttempt int       // the first attempt of the current retry budget

	// Waits counts the part's engine waits before this attempt in its
	// retry budget, MaxWaits the bound (0: none); both are known only when
	// the run ended waiting (Runner.countWaits).
	Waits, MaxWaits int

	// Ran: the handler ran and returned Err; Lost is what the heartbeat
	// found; Interrupted: shutdown cut the step short; Stopped: the task's
	// work stopped while the step ran, and how it ended (cancelled, failed).
	Ran         bool
	Err         error
	Lost        loss
	Interrupted bool
	Stopped     string

	// Commits counts the outcomes committed or tried; the last one recorded
	// Recorded and found Commit (CommitErr), then publishing the messages it
	// added failed with PublishErr.
	Commits    int
	Recorded   recOutcome
	Commit     commitResult
	CommitErr  error
	PublishErr error
}

// severity is how loudly the runner logs a decision.
type severity uint8

const (
	sevInfo severity = iota
	sevWarn
	sevError
)

// decision is what the runner does next, and why.
type decision struct {
	Action action
	// Record (actRecord) is the outcome committed, which pkg/attempt
	// carries out (attempt.Finish); Staged says whether what the handler
	// staged is committed with it.
	Record recOutcome
	Staged bool
	// Err is the error recorded (actRecord), dead-lettered (actReject) or
	// that led to the decision; Class is its class and Reason the dead
	// letter's failure reason.
	Err    error
	Class  string
	Reason string
	// Retries (a dead-lettered outcome) is how often the step was retried
	// before it gave up.
	Retries int
	// Delay is the wait of actLater and the wanted retry delay of a
	// retried outcome; Held (actLater) carries the held-since time.
	Delay time.Duration
	Held  bool
	// WaitReason and WaitUntil (a waited outcome) are why no engine could
	// serve the step and when it can go on.
	WaitReason string
	WaitUntil  time.Time
	// Release (actHandBack) frees the attempt's lease first, so that the
	// next delivery need not wait for it to run out.
	Release bool
	// Back (actHandBack, actLater) is why the message goes back without
	// an outcome: the reason its hand-back is recorded with (attempt.HandBack).
	Back string
	// Metric is counted in dubflow_step_messages_total ("" for none); Why
	// is the log message ("" for none), logged at Level.
	Metric string
	Why    string
	Level  severity
}

// Reasons a message goes back without an outcome (decision.Back), as
// its hand-back is recorded and the task's timeline shows it.
const (
	backShutdown     = "shutdown"              // shutdown cut the step short
	backUnavailable  = "unavailable"           // a service the step needs was down
	backHeld         = "lease_held"            // another worker holds the part's lease
	backPredecessor  = "waits_for_predecessor" // the previous step has not succeeded yet
	backClaimError   = "claim_error"           // the claim statement failed
	backClaimLost    = "claim_lost"            // the claim row is gone (a database crash)
	backCommit       = "commit_failed"         // the outcome could not be committed
	backPublish      = "publish_failed"        // the messages after the commit could not be published
	backUnknownClaim = "unknown_claim"         // a claim outcome this runtime does not know
	backStopped      = "consumer_stopped"      // the consumer stopped (shutdown, pause) before the delivery started
)

// policy is the configuration decisions depend on.
type policy struct {
	maxRetries     int
	backoff        func(n int) time.Duration
	lease          time.Duration
	dependencyWait time.Duration
	deliveryLimit  int
}

// decide returns what to do next with a delivery, given what is known
// about it.
func (p policy) decide(f facts) decision {
	switch {
	case f.Invalid != nil:
		return decision{Action: actReject, Class: wire.ClassInvalid, Err: f.Invalid, Reason: f.Invalid.Error(),
			Metric: "rejected", Why: "message dead-lettered", Level: sevError}
	case f.Commits > 0:
		return p.afterCommit(f)
	case f.Ran:
		return p.afterRun(f)
	default:
		return p.afterClaim(f)
	}
}

// afterClaim decides from the claim whether the step runs now.
func (p policy) afterClaim(f facts) decision {
	switch f.Claim {
	case claimFailed:
		return decision{Action: actHandBack, Back: backClaimError, Err: f.ClaimErr, Metric: "claim_error",
			Why: "claim failed; message handed back", Level: sevError}
	case claimDone, claimFinished:
		return decision{Action: actAck, Metric: "duplicate", Why: "duplicate message skipped"}
	case claimEnded:
		return decision{Action: actAck, Metric: "ended", Why: "task cancelled or failed; message dropped"}
	case claimWaiting:
		age := f.Now.Sub(f.CreatedAt)
		if age > p.dependencyWait {
			return reject(wire.ClassPermanent, fmt.Errorf("step %s still waits for %s after %s", f.Step, f.After, age.Round(time.Second)))
		}
		return decision{Action: actLater, Back: backPredecessor, Delay: waitDelay(age), Metric: "waiting", Why: "predecessor not done; message waits"}
	case claimHeld:
		if !f.HeldSince.IsZero() {
			if held, bound := f.Now.Sub(f.HeldSince), f.Timeout+3*p.lease; held > bound {
				return reject(wire.ClassTransient, fmt.Errorf("step %s held by another attempt for %s, longer than a step may run (%s)",
					f.Step, held.Round(time.Second), bound))
			}
		}
		return decision{Action: actLater, Back: backHeld, Delay: min(max(f.HeldUntil.Sub(f.Now), time.Second), p.lease), Held: true,
			Metric: "held", Why: "another worker holds the step; checking again later"}
	case claimClaimed:
		if f.HandBacks >= p.deliveryLimit {
			// Counted across the delay tiers, which the broker's own
			// delivery limit forgets.
			d := p.result(f, fault.Permanent(fmt.Errorf("step %s handed back %d times without an outcome (the database or the broker kept failing)", f.Step, f.HandBacks)))
			d.Why = "message handed back too often; not run again"
			return d
		}
		return decision{Action: actRun, Why: "step started"}
	default:
		return decision{Action: actHandBack, Back: backUnknownClaim, Why: "unknown claim outcome; message handed back", Level: sevError}
	}
}

// afterRun decides what the handler's run comes to.
func (p policy) afterRun(f facts) decision {
	switch {
	case f.Lost == leaseLost:
		return decision{Action: actAck, Metric: "lease_lost", Why: "lease lost during the step; another worker owns it now", Level: sevWarn}
	case f.Lost == claimLost:
		// Nobody else holds the attempt: its row is gone. Retry, never ack.
		return decision{Action: actHandBack, Back: backClaimLost, Metric: "claim_lost",
			Why: "claim lost during the step (a database crash?); message handed back", Level: sevWarn}
	case f.Stopped != "":
		// Whatever the run came to, its task's work stopped: nothing of it
		// is kept, nothing is retried.
		return decision{Action: actRecord, Record: recRefused, Err: fmt.Errorf("task %s while the step ran; step stopped", f.Stopped),
			Metric: recRefused, Why: "task cancelled or failed while the step ran; step stopped", Level: sevWarn}
	case f.Interrupted:
		// Shutdown cut the step short: hand it back for another worker.
		return decision{Action: actHandBack, Back: backShutdown, Release: true, Err: f.Err, Metric: "handed_back",
			Why: "step interrupted by shutdown; handed back", Level: sevWarn}
	case fault.IsUnavailable(f.Err) && f.HandBacks+1 < p.deliveryLimit:
		// A service the step needs is down (the object store restarting):
		// not the step's failure. Wait for it through hand-backs, which
		// pause longer and longer, instead of spending the step's retries
		// in seconds; the last delivery the limit allows runs the normal
		// retries.
		return decision{Action: actHandBack, Back: backUnavailable, Release: true, Err: f.Err, Metric: "unavailable",
			Why: "a service the step needs is unavailable; handed back without spending a retry", Level: sevWarn}
	default:
		return p.result(f, f.Err)
	}
}

// result turns a claimed attempt's result into the outcome to record:
// succeeded, parked, retried after a delay while the budget lasts, else
// dead-lettered.
func (p policy) result(f facts, err error) decision {
	switch {
	case err == nil:
		return decision{Action: actRecord, Record: recSucceeded, Staged: true, Metric: recSucceeded, Why: "step succeeded"}
	case fault.IsParked(err):
		return decision{Action: actRecord, Record: recParked, Staged: true, Err: err, Metric: recParked,
			Why: "step parked for an operator", Level: sevWarn}
	}
	if reason, until, ok := fault.WaitOf(err); ok {
		if f.MaxWaits > 0 && f.Waits >= f.MaxWaits {
			err = fmt.Errorf("no engine could serve the step after %d waits (the last %s until %s): %w",
				f.Waits, reason, until.UTC().Format(time.RFC3339), err)
			return decision{Action: actRecord, Record: recDeadLettered, Err: err, Class: wire.ClassTransient,
				Reason: err.Error(), Retries: f.Attempt - max(f.BaseAttempt, 1), Metric: recDeadLettered,
				Why: "engine waits exhausted; dead-lettered", Level: sevError}
		}
		return decision{Action: actRecord, Record: recWaited, Err: err, Delay: max(until.Sub(f.Now), time.Second),
			WaitReason: reason, WaitUntil: until, Metric: recWaited,
			Why: "no engine can serve the step; waiting without spending a retry"}
	}
	class := ErrorClass(err)
	used := f.Attempt - max(f.BaseAttempt, 1) + 1
	if class != wire.ClassPermanent && used <= p.maxRetries {
		delay := p.backoff(used)
		if hint, ok := fault.RetryAfterHint(err); ok && hint > delay {
			delay = hint
		}
		return decision{Action: actRecord, Record: recRetried, Err: err, Class: class, Delay: delay,
			Metric: recRetried, Why: "step failed; retry scheduled", Level: sevWarn}
	}
	reason := err.Error()
	if class != wire.ClassPermanent {
		reason = fmt.Sprintf("%s (%s)", reason, retried(used-1))
	}
	return decision{Action: actRecord, Record: recDeadLettered, Err: err, Class: class, Reason: reason, Retries: used - 1,
		Metric: recDeadLettered, Why: "step failed; dead-lettered", Level: sevError}
}

// afterCommit decides what a commit comes to.
func (p policy) afterCommit(f facts) decision {
	switch {
	case f.Commit == committed && f.PublishErr != nil:
		return decision{Action: actHandBack, Back: backPublish, Err: f.PublishErr, Level: sevWarn,
			Why: "publish after commit failed; the outbox sweep will publish; message handed back"}
	case f.Commit == committed:
		return decision{Action: actAck}
	case f.Commits == 1 && f.Commit == commitFailed && fault.IsUnavailable(f.CommitErr) && f.HandBacks+1 < p.deliveryLimit:
		// The database went away under the commit: not the step's
		// failure. Free the attempt and hand the message back, as for an
		// outage under the handler; the delivery limit bounds the wait.
		return decision{Action: actHandBack, Back: backUnavailable, Release: true, Err: f.CommitErr, Metric: "unavailable",
			Why: "database unavailable at commit; handed back without spending a retry", Level: sevWarn}
	case f.Recorded == recRefused && f.Commit != commitSettled:
		// The stopped attempt could not be closed: hand the message back
		// (its lease freed); its next delivery finds the task ended.
		return decision{Action: actHandBack, Back: backCommit, Release: true, Err: f.CommitErr,
			Why: "closing a stopped step failed; message handed back", Level: sevWarn}
	case f.Commits == 1 && (f.Commit == commitFailed || f.Commit == commitClaimLost):
		// The outcome cannot be committed (a statement the handler staged
		// fails, say). Record the attempt as failed for that reason
		// instead: a commit that keeps failing uses up the retry budget and
		// ends in the DLQ, rather than re-running the step forever.
		d := p.result(f, fmt.Errorf("commit %s outcome: %w", f.Recorded, f.CommitErr))
		d.Staged, d.Metric, d.Level = false, "commit_error", sevError
		d.Why = "commit failed; recording the attempt as failed"
		return d
	case f.Commit == commitClaimLost:
		return decision{Action: actHandBack, Back: backClaimLost, Err: f.CommitErr, Metric: "claim_lost",
			Why: "claim lost (a database crash?); message handed back", Level: sevWarn}
	case f.Commit == commitSettled:
		return decision{Action: actAck, Err: f.CommitErr, Metric: "lease_lost", Why: "step outcome discarded", Level: sevWarn}
	default:
		// The database is unreachable: free the attempt for the next
		// delivery and hand the message back.
		return decision{Action: actHandBack, Back: backCommit, Release: true, Err: f.CommitErr,
			Why: "commit failed; message handed back", Level: sevError}
	}
}

// retried says how often a step was retried, as a dead letter's reason
// says it: "not retried", "retried once", "retried 3 times".
func retried(n int) string {
	switch n {
	case 0:
		return "not retried"
	case 1:
		return "retried once"
	}
	return fmt.Sprintf("retried %d times", n)
}

// reject dead-letters a message that never reached its handler.
func reject(class string, err error) decision {
	return decision{Action: actReject, Class: class, Err: err, Reason: err.Error(),
		Metric: "rejected", Why: "message dead-lettered", Level: sevError}
}

// waitDelay spaces the checks of a message that waits for its predecessor:
// soon at first, then at most once a minute.
func waitDelay(age time.Duration) time.Duration {
	return min(max(age/4, time.Second), time.Minute)
}

// handBackPause is the pause before the n-th hand-back in a row: it grows
// while hand-backs follow each other (1s, 2s, 4s, ... 30s), so that an
// outage of the database neither spins the worker nor exhausts the queue's
// delivery limit within minutes.
func handBackPause(n int32) time.Duration {
	return min(time.Second<<min(max(n, 1)-1, 5), 30*time.Second)
}
