package attempt

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// Claim outcomes returned by Claim.
const (
	Claimed  = "claimed"  // the caller holds the attempt's lease
	Done     = "done"     // the part already succeeded
	Waiting  = "waiting"  // the predecessor step has not succeeded yet
	Held     = "held"     // another live worker holds this attempt
	Finished = "finished" // this attempt already failed or was parked
	// Ended: the task's work has stopped (it was cancelled or failed, or
	// an operator cancelled its parent: task_stopped in the migrations);
	// no attempt of it is claimed any more.
	Ended = "ended"
)

// Statuses of an attempt's row.
const (
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusParked    = "parked"
)

// Outcome is how a claimed attempt ends: what the step runtime decided
// (pkg/step's decide) and Finish carries out. Its value is also the
// runtime's metric label.
type Outcome string

// The outcomes of a claimed attempt.
const (
	// Succeeded: the step's work and what it staged are committed.
	Succeeded Outcome = "succeeded"
	// Parked: the step stops for an operator (tts_requeue).
	Parked Outcome = "parked"
	// Retried: the attempt failed; the next one goes through a delay tier.
	Retried Outcome = "retried"
	// DeadLettered: the attempt failed for good; its message goes to the DLQ.
	DeadLettered Outcome = "dead_lettered"
	// Refused: the task's status refused the step's outcome, or its work
	// stopped while the step ran (it was cancelled or failed): nothing the
	// step staged is committed, its message is acked.
	Refused Outcome = "refused"
	// Waited: no engine could serve the step (its pool was spent, rate
	// limited or down); the attempt ends failed with the wait's reason and
	// time (Wait), a delay tier re-offers the step then, and the next
	// attempt's retry budget does not count it (claim_step).
	Waited Outcome = "waited"
)

// Status is the status an attempt ending with o is recorded with.
func (o Outcome) Status() string {
	switch o {
	case Succeeded:
		return StatusSucceeded
	case Parked:
		return StatusParked
	default:
		return StatusFailed
	}
}

// ErrLeaseLost is returned when a worker tries to finish an attempt it no
// longer holds (its lease ran out and another worker took the attempt over).
var ErrLeaseLost = errors.New("step lease lost")

// ErrClaimLost is returned when the attempt's claim row is gone (a claim
// committed without waiting for the WAL flush is lost when Postgres
// crashes). Nobody else holds the attempt: the message must be retried, never
// acked.
var ErrClaimLost = errors.New("step claim lost")

// ErrTaskStopped matches the *StoppedError Extend returns when the
// attempt's task stopped while the step ran (task_stopped: it was
// cancelled or failed, or an operator cancelled its parent): the lease was
// extended, but the step should stop.
var ErrTaskStopped = errors.New("task stopped")

// StoppedError is ErrTaskStopped with the status that stopped the task's
// work (cancelled, failed).
type StoppedError struct{ Status string }

func (e *StoppedError) Error() string { return "task stopped: " + e.Status }

// Is makes errors.Is(err, ErrTaskStopped) true.
func (e *StoppedError) Is(target error) bool { return target == ErrTaskStopped }

// ErrDuplicate is returned when a part that already succeeded would
// succeed a second time; the second run's effects are rolled back.
var ErrDuplicate = errors.New("step part already succeeded")

// Key names one attempt of one part of one step of a task.
type Key struct {
	TaskID  uuid.UUID
	Step    string
	Part    string
	Attempt int
}

// Lease is the result of Claim: its outcome, and the claimed attempt's row.
type Lease struct {
	Outcome string
	// StepID is the claimed attempt's row (Claimed only).
	StepID int64
	// BaseAttempt is the first attempt of the current retry budget.
	BaseAttempt int
	// HeldUntil is when the holder's lease ends (Held only).
	HeldUntil time.Time
	// QueueWait is how long the message waited in its queue, in seconds,
	// recorded by the claim that created the attempt (nil otherwise, or
	// when the message did not say when it was ready); Project is then the
	// task's project.
	QueueWait *float64
	Project   string
}

// MapError turns the owner's own Postgres errors into sentinel errors:
// DF001 into ErrLeaseLost, DF002 into ErrClaimLost, a second success of one
// part into ErrDuplicate.
func MapError(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "DF001":
			return fmt.Errorf("%w: %s", ErrLeaseLost, pg.Message)
		case pg.Code == "DF002":
			return fmt.Errorf("%w: %s", ErrClaimLost, pg.Message)
		case pg.Code == "23505" && pg.ConstraintName == "task_steps_one_success":
			return fmt.Errorf("%w: %s", ErrDuplicate, pg.Message)
		}
	}
	return err
}
