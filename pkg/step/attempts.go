package step

import (
	"context"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/internal/replay"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// This file is what services may do with the step attempts besides running
// steps. The attempts' owner, pkg/internal/attempt, is out of the services'
// reach: claims, leases and outcomes are the Runner's alone; a handler
// stages the one transition it may need (CoverParts), and the reconciler
// reads pending parts and closes expired attempts through the functions
// below. Those that judge leases and ages take the time: nil is the
// database's clock.

// CoverParts stages, in the success transaction, the cover of the tts
// parts of task by a run of the whole task (attempt.Cover): each part not
// succeeded is recorded as succeeded by by, so that the step is complete
// and a late copy of a part's message is skipped as done.
func (m *Message) CoverParts(task uuid.UUID, by string) {
	m.stmts = append(m.stmts, statement(attempt.Cover(task, by)))
}

// StatusRunning is the status of an attempt that holds (or held) a lease.
const StatusRunning = attempt.StatusRunning

// RedriveReasonPrefix starts the reason of every re-drive the reconciler
// records (CountNeedlessRedrives counts them).
const RedriveReasonPrefix = attempt.RedriveReasonPrefix

// PendingThresholds say when a pending part counts, and when it is idle.
type PendingThresholds = attempt.PendingThresholds

// PendingCount is how many parts of a step are pending, and how many of
// them are idle.
type PendingCount = attempt.PendingCount

// PendingPart is one idle pending part.
type PendingPart = attempt.PendingPart

// ClosedAttempt is an attempt of an ended task CloseEndedAttempts closed.
type ClosedAttempt = attempt.Closed

// CountPendingParts counts, per step of steps, the pending parts and the
// idle ones among them at now (attempt.CountPendingParts).
func CountPendingParts(ctx context.Context, q store.Querier, steps []string, th PendingThresholds, now *time.Time) (map[string]PendingCount, error) {
	return attempt.CountPendingParts(ctx, q, steps, th, now)
}

// IdlePendingParts returns up to limit idle pending parts of step at now
// whose last activity is before before (attempt.IdlePendingParts).
func IdlePendingParts(ctx context.Context, q store.Querier, step string, th PendingThresholds, before time.Time, limit int, now *time.Time) ([]PendingPart, error) {
	return attempt.IdlePendingParts(ctx, q, step, th, before, limit, now)
}

// StepProgress returns, per step of steps, the latest emission among the
// attempts claimed within window before now (attempt.StepProgress).
func StepProgress(ctx context.Context, q store.Querier, steps []string, window time.Duration, now *time.Time) (map[string]time.Time, error) {
	return attempt.StepProgress(ctx, q, steps, window, now)
}

// MovedOn reports whether a part moved on since its attempt attemptID was
// read (attempt.MovedOn).
func MovedOn(ctx context.Context, q store.Querier, task uuid.UUID, step, part string, attemptID int64, now *time.Time) (bool, error) {
	return attempt.MovedOn(ctx, q, task, step, part, attemptID, now)
}

// LeaseHolders returns the tasks with an attempt holding a lease live at
// now (attempt.LeaseHolders).
func LeaseHolders(ctx context.Context, q store.Querier, now *time.Time) ([]uuid.UUID, error) {
	return attempt.LeaseHolders(ctx, q, now)
}

// CountNeedlessRedrives counts the reconciler's re-drives of parts that
// were only waiting (attempt.CountNeedlessRedrives).
func CountNeedlessRedrives(ctx context.Context, q store.Querier) (int, error) {
	return attempt.CountNeedlessRedrives(ctx, q)
}

// CloseEndedAttempts closes, as failed, up to limit running attempts of done
// or failed tasks whose lease ran out more than grace before now
// (attempt.CloseEnded).
func CloseEndedAttempts(ctx context.Context, q store.Querier, grace time.Duration, limit int, now *time.Time) ([]ClosedAttempt, error) {
	return attempt.CloseEnded(ctx, q, grace, limit, now)
}

// CloseExpiredAttempt closes the attempt stepID as failed with reason if
// its lease ran out before now, so that its late outcome is refused; false
// when it was taken over or ended meanwhile (attempt.CloseExpired).
func CloseExpiredAttempt(ctx context.Context, q store.Querier, stepID int64, reason string, now *time.Time) (bool, error) {
	return attempt.CloseExpired(ctx, q, stepID, reason, now)
}

// AddPart records, on q, that step of task has part, with the message
// emitted for it (attempt.AddPart); a part recorded before is kept.
func AddPart(ctx context.Context, q store.Querier, task uuid.UUID, step, part string, message []byte) error {
	return attempt.AddPart(task, step, part, message).Exec(ctx, q)
}

// UnfinishedMessages returns the message of each part of the task's step
// without a success, to re-drive it from (replay.Unfinished).
func UnfinishedMessages(ctx context.Context, q attempt.Reader, task uuid.UUID, step string) ([]*wire.Envelope, error) {
	return replay.Unfinished(ctx, q, task, step)
}

// PartMessage is a registered part of a step with the message emitted for
// it.
type PartMessage = attempt.Part

// PartMessages returns the parts registered for the task's step, in the
// order they were registered (attempt.Parts).
func PartMessages(ctx context.Context, q attempt.Reader, task uuid.UUID, step string) ([]PartMessage, error) {
	return attempt.Parts(ctx, q, task, step)
}
