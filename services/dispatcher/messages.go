package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Payloads of the task.waiting_queue messages (proto/waiting_*.schema.json).
// Ids are read as text and parsed by queue.ParseID, as the HTTP API parses
// them, so both doors take the same ids.
type (
	// enqueuePayload is waiting.enqueue; the new entry's id is the
	// envelope's task_id, so a replayed message finds its entry.
	enqueuePayload struct {
		ProjectID string `json:"project_id"`
		VisitorID string `json:"visitor_id"`
		queue.Ask
	}
	// processPayload is waiting.process: one attempt on an entry, a match
	// of a project, or (with neither) one scan of the whole queue.
	processPayload struct {
		EntryID   *string `json:"entry_id,omitempty"`
		ProjectID *string `json:"project_id,omitempty"`
	}
	// cancelPayload is waiting.cancel.
	cancelPayload struct {
		EntryID string `json:"entry_id"`
	}
	// capacityPayload is waiting.capacity: "set" an agent's project,
	// presence and capacity, or "release" one conversation.
	capacityPayload struct {
		StaffID       string `json:"staff_id"`
		Action        string `json:"action"`
		ProjectID     string `json:"project_id"`
		Availability  string `json:"availability"`
		MaxConcurrent int    `json:"max_concurrent"`
	}
)

// handlers serve the task.waiting_queue steps.
type handlers struct {
	q       *queue.Queue
	metrics *metrics
}

// routes returns the step routes of task.waiting_queue. Each route admits
// its message before the runtime claims it (step.Route.Admit) with the
// rules the HTTP API applies, so a message either door would refuse is
// dead-lettered as invalid at once and leaves no step row behind.
func (h handlers) routes(timeout time.Duration) []step.Route {
	return []step.Route{
		{Step: wire.StepWaitingEnqueue, Timeout: timeout, Handler: step.HandlerFunc(h.enqueue),
			Admit: func(env *wire.Envelope) error { _, err := admitEnqueue(env); return err }},
		{Step: wire.StepWaitingProcess, Timeout: timeout, Handler: step.HandlerFunc(h.process),
			Admit: func(env *wire.Envelope) error { _, err := admitProcess(env); return err }},
		{Step: wire.StepWaitingCancel, Timeout: timeout, Handler: step.HandlerFunc(h.cancel),
			Admit: func(env *wire.Envelope) error { _, err := admitCancel(env); return err }},
		{Step: wire.StepWaitingCapacity, Timeout: timeout, Handler: step.HandlerFunc(h.capacity),
			Admit: func(env *wire.Envelope) error { _, err := admitCapacity(env); return err }},
	}
}

// decodePayload reads the envelope's payload into v: valid UTF-8 (a JSON
// decoder would quietly turn anything else into U+FFFD), then JSON.
func decodePayload(env *wire.Envelope, v any) error {
	if !utf8.Valid(env.Payload) {
		return fmt.Errorf("%w: payload is not valid UTF-8", queue.ErrInvalid)
	}
	if err := json.Unmarshal(env.Payload, v); err != nil {
		return fmt.Errorf("%w: decode %s payload: %w", queue.ErrInvalid, env.Step, err)
	}
	return nil
}

// admitEnqueue is the request a waiting.enqueue message makes, admitted as
// POST /internal/ai/events admits one (queue.Ask.Admit); its entry id is
// the envelope's task_id.
func admitEnqueue(env *wire.Envelope) (queue.EnqueueRequest, error) {
	var p enqueuePayload
	if err := decodePayload(env, &p); err != nil {
		return queue.EnqueueRequest{}, err
	}
	r, err := p.Admit(p.ProjectID, p.VisitorID, queue.SourceSystem)
	r.ID = env.TaskID
	return r, err
}

// process is what a waiting.process message asks for: an entry, a
// project, or neither (a scan).
type process struct{ entry, project *uuid.UUID }

func admitProcess(env *wire.Envelope) (process, error) {
	var p processPayload
	if err := decodePayload(env, &p); err != nil {
		return process{}, err
	}
	var out process
	for _, f := range []struct {
		name string
		raw  *string
		into **uuid.UUID
	}{{"entry_id", p.EntryID, &out.entry}, {"project_id", p.ProjectID, &out.project}} {
		if f.raw == nil {
			continue
		}
		id, err := queue.ParseID(f.name, *f.raw)
		if err != nil {
			return process{}, err
		}
		*f.into = &id
	}
	return out, nil
}

func admitCancel(env *wire.Envelope) (uuid.UUID, error) {
	var p cancelPayload
	if err := decodePayload(env, &p); err != nil {
		return uuid.Nil, err
	}
	return queue.ParseID("entry_id", p.EntryID)
}

// admitCapacity reads a waiting.capacity message: for "set", the update
// as PUT /staff/{id} admits it; for "release", the agent.
func admitCapacity(env *wire.Envelope) (capacityPayload, error) {
	var p capacityPayload
	if err := decodePayload(env, &p); err != nil {
		return p, err
	}
	if _, err := queue.ParseID("staff_id", p.StaffID); err != nil {
		return p, err
	}
	switch p.Action {
	case "set":
		_, err := p.update()
		return p, err
	case "release":
		return p, nil
	}
	return p, fmt.Errorf("%w: unknown waiting_capacity action %q (want set or release)", queue.ErrInvalid, p.Action)
}

// update is the agent's update a "set" carries.
func (p capacityPayload) update() (queue.StaffUpdate, error) {
	staff, err := queue.ParseID("staff_id", p.StaffID)
	if err != nil {
		return queue.StaffUpdate{}, err
	}
	project, err := queue.ParseID("project_id", p.ProjectID)
	if err != nil {
		return queue.StaffUpdate{}, err
	}
	u := queue.StaffUpdate{ID: staff, ProjectID: project, Availability: queue.Availability(p.Availability), MaxConcurrent: p.MaxConcurrent}
	if err := u.Validate(); err != nil {
		return queue.StaffUpdate{}, fmt.Errorf("%w: %w", queue.ErrInvalid, err)
	}
	return u, nil
}

func (h handlers) enqueue(ctx context.Context, msg *step.Message) error {
	req, err := admitEnqueue(msg.Envelope)
	if err != nil {
		return fault.Permanent(err)
	}
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
	p, err := admitProcess(msg.Envelope)
	if err != nil {
		return fault.Permanent(err)
	}
	switch {
	case p.entry != nil:
		if _, err := h.q.Entry(ctx, *p.entry); err != nil {
			return classify(err)
		}
		h.attempt(msg, *p.entry)
		return nil
	case p.project != nil:
		a, err := h.q.Match(ctx, *p.project)
		h.metrics.assigned.Add(float64(len(a)))
		return err
	}
	res, err := h.q.Scan(ctx)
	h.metrics.assigned.Add(float64(len(res.Assigned)))
	h.metrics.expired.Add(float64(len(res.Expired)))
	return err
}

func (h handlers) cancel(ctx context.Context, msg *step.Message) error {
	id, err := admitCancel(msg.Envelope)
	if err != nil {
		return fault.Permanent(err)
	}
	_, err = h.q.Cancel(ctx, id)
	return classify(err)
}

func (h handlers) capacity(ctx context.Context, msg *step.Message) error {
	p, err := admitCapacity(msg.Envelope)
	if err != nil {
		return fault.Permanent(err)
	}
	if p.Action == "set" {
		u, _ := p.update()
		st, err := h.q.PutStaff(ctx, u)
		if err != nil {
			return classify(err)
		}
		a, err := h.q.Rematch(ctx, st)
		h.metrics.assigned.Add(float64(len(a)))
		return err
	}
	// A release commits with the step's success, exactly once, and so do
	// the pairings of the freed unit with the visitors queued for the
	// agent; the matching it allows follows as a waiting.process message.
	staff, _ := queue.ParseID("staff_id", p.StaffID)
	st, err := h.q.Staff(ctx, staff)
	if err != nil {
		return classify(err)
	}
	if st.CurrentLoad == 0 {
		return fault.Permanent(fmt.Errorf("release staff %s: %w", st.ID, queue.ErrNothingToRelease))
	}
	msg.Then(func(ctx context.Context, tx pgx.Tx) error {
		paired, err := h.q.ReleaseIn(ctx, tx, st.ID)
		h.metrics.assigned.Add(float64(len(paired)))
		return err
	})
	project := st.ProjectID.String()
	return msg.Emit(wire.StepWaitingProcess, processPayload{ProjectID: &project})
}

// classify marks errors no retry can fix as permanent.
func classify(err error) error {
	var dup *queue.DuplicateError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &dup), errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrNotWaiting),
		errors.Is(err, queue.ErrNothingToRelease), errors.Is(err, queue.ErrInvalid), errors.Is(err, queue.ErrAgentBusy):
		return fault.Permanent(err)
	}
	return err
}
