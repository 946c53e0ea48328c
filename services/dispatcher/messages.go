package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Payloads of the task.waiting_queue messages (proto/waiting_*.schema.json).
type (
	// enqueuePayload is waiting.enqueue; the new entry's id is the
	// envelope's task_id, so a replayed message finds its entry.
	enqueuePayload struct {
		ProjectID uuid.UUID `json:"project_id"`
		VisitorID uuid.UUID `json:"visitor_id"`
		queue.Ask
	}
	// processPayload is waiting.process: one attempt on an entry, a match
	// of a project, or (with neither) one scan of the whole queue.
	processPayload struct {
		EntryID   *uuid.UUID `json:"entry_id,omitempty"`
		ProjectID *uuid.UUID `json:"project_id,omitempty"`
	}
	// cancelPayload is waiting.cancel.
	cancelPayload struct {
		EntryID uuid.UUID `json:"entry_id"`
	}
	// capacityPayload is waiting.capacity: "set" an agent's project,
	// presence and capacity, or "release" one conversation.
	capacityPayload struct {
		StaffID       uuid.UUID `json:"staff_id"`
		Action        string    `json:"action"`
		ProjectID     uuid.UUID `json:"project_id"`
		Availability  string    `json:"availability"`
		MaxConcurrent int       `json:"max_concurrent"`
	}
)

// handlers serve the task.waiting_queue steps.
type handlers struct {
	q       *queue.Queue
	metrics *metrics
}

// routes returns the step routes of task.waiting_queue.
func (h handlers) routes(timeout time.Duration) []step.Route {
	return []step.Route{
		{Step: wire.StepWaitingEnqueue, Timeout: timeout, Handler: step.HandlerFunc(h.enqueue)},
		{Step: wire.StepWaitingProcess, Timeout: timeout, Handler: step.HandlerFunc(h.process)},
		{Step: wire.StepWaitingCancel, Timeout: timeout, Handler: step.HandlerFunc(h.cancel)},
		{Step: wire.StepWaitingCapacity, Timeout: timeout, Handler: step.HandlerFunc(h.capacity)},
	}
}

func (h handlers) enqueue(ctx context.Context, msg *step.Message) error {
	var p enqueuePayload
	if err := msg.Decode(&p); err != nil {
		return fault.Permanent(err)
	}
	req, err := p.Request(p.ProjectID, p.VisitorID, queue.SourceSystem)
	if err != nil {
		return fault.Permanent(err)
	}
	req.ID = msg.Envelope.TaskID
	e, err := h.q.Enqueue(ctx, req)
	if err != nil {
		return classify(err)
	}
	// The trigger on enqueue commits with the step's success.
	h.attempt(msg, e.ID)
	msg.Log.Info().Str("entry_id", e.ID.String()).Msg("entry enqueued")
	return nil
}

// attempt stages one attempt on the entry in the step's success
// transaction: it commits with the step, exactly once however often the
// message runs.
func (h handlers) attempt(msg *step.Message, id uuid.UUID) {
	msg.Then(func(ctx context.Context, tx pgx.Tx) error {
		out, err := h.q.ProcessIn(ctx, tx, id, false)
		if err == nil {
			h.metrics.outcome(out)
		}
		return err
	})
}

func (h handlers) process(ctx context.Context, msg *step.Message) error {
	var p processPayload
	if err := msg.Decode(&p); err != nil {
		return fault.Permanent(err)
	}
	switch {
	case p.EntryID != nil:
		if _, err := h.q.Entry(ctx, *p.EntryID); err != nil {
			return classify(err)
		}
		h.attempt(msg, *p.EntryID)
		return nil
	case p.ProjectID != nil:
		a, err := h.q.Match(ctx, *p.ProjectID)
		h.metrics.assigned.Add(float64(len(a)))
		return err
	}
	res, err := h.q.Scan(ctx)
	h.metrics.assigned.Add(float64(len(res.Assigned)))
	h.metrics.expired.Add(float64(len(res.Expired)))
	return err
}

func (h handlers) cancel(ctx context.Context, msg *step.Message) error {
	var p cancelPayload
	if err := msg.Decode(&p); err != nil {
		return fault.Permanent(err)
	}
	_, err := h.q.Cancel(ctx, p.EntryID)
	return classify(err)
}

func (h handlers) capacity(ctx context.Context, msg *step.Message) error {
	var p capacityPayload
	if err := msg.Decode(&p); err != nil {
		return fault.Permanent(err)
	}
	switch p.Action {
	case "set":
		st, err := h.q.PutStaff(ctx, queue.StaffUpdate{ID: p.StaffID, ProjectID: p.ProjectID,
			Availability: queue.Availability(p.Availability), MaxConcurrent: p.MaxConcurrent})
		if err != nil {
			return classify(err)
		}
		a, err := h.q.Match(ctx, st.ProjectID)
		h.metrics.assigned.Add(float64(len(a)))
		return err
	case "release":
		// The release commits with the step's success, exactly once; the
		// matching it allows follows as a waiting.process message.
		st, err := h.q.Staff(ctx, p.StaffID)
		if err != nil {
			return classify(err)
		}
		if st.CurrentLoad == 0 {
			return fault.Permanent(fmt.Errorf("release staff %s: %w", st.ID, queue.ErrNothingToRelease))
		}
		msg.Then(func(ctx context.Context, tx pgx.Tx) error { return queue.ReleaseIn(ctx, tx, st.ID) })
		return msg.Emit(wire.StepWaitingProcess, processPayload{ProjectID: &st.ProjectID})
	}
	return fault.Permanent(fmt.Errorf("unknown waiting_capacity action %q (want set or release)", p.Action))
}

// classify marks errors no retry can fix as permanent.
func classify(err error) error {
	var dup *queue.DuplicateError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &dup), errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrNotWaiting),
		errors.Is(err, queue.ErrNothingToRelease), errors.Is(err, queue.ErrInvalid):
		return fault.Permanent(err)
	}
	return err
}
