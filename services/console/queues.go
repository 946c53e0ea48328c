package main

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// queueView is one step's work queue in GET /api/queues: its depth and
// consumers (the broker's), whether it is paused and by whom, and how many
// live worker processes serve it.
type queueView struct {
	Step      string     `json:"step"`
	Queue     string     `json:"queue"`
	Ready     int        `json:"ready"`
	Consumers int        `json:"consumers"`
	Missing   bool       `json:"missing,omitempty"`
	Paused    bool       `json:"paused"`
	ChangedAt *time.Time `json:"changedAt"`
	ChangedBy string     `json:"changedBy"`
	Workers   int        `json:"workers"`
}

// listQueues answers GET /api/queues: every step of the pipeline.
func (s *server) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.queueViews(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs, "pausePollSeconds": worker.PausePoll.Seconds()})
}

func (s *server) queueViews(r *http.Request) ([]queueView, error) {
	ctx := r.Context()
	pauses, err := worker.Pauses(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	procs, err := worker.Processes(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(wire.Pipeline))
	for i, st := range wire.Pipeline {
		names[i] = wire.RoutingKey(st)
	}
	depth, err := s.queues.Inspect(ctx, names)
	if err != nil {
		return nil, apierr.UnavailableBecause("the broker cannot be read now; try again", err)
	}
	out := make([]queueView, len(wire.Pipeline))
	for i, st := range wire.Pipeline {
		q := depth[names[i]]
		v := queueView{Step: st, Queue: names[i], Ready: q.Ready, Consumers: q.Consumers, Missing: q.Missing}
		if p, ok := pauses[st]; ok {
			v.Paused, v.ChangedAt, v.ChangedBy = p.Paused, &p.ChangedAt, p.ChangedBy
		}
		for _, p := range procs {
			if p.Status != "lost" && p.Status != "stopped" && slices.Contains(p.Steps, st) {
				v.Workers++
			}
		}
		out[i] = v
	}
	return out, nil
}

// pauseQueue answers POST /api/queues/{step}/pause: the step's workers on
// every replica cancel their consumers within worker.PausePoll (steps
// running then finish); its messages wait in the queue.
func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, true) }

// resumeQueue answers POST /api/queues/{step}/resume.
func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

func (s *server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	p, err := worker.SetPaused(r.Context(), s.pool, r.PathValue("step"), paused, principalOf(r).Name)
	if errors.Is(err, worker.ErrUnknownStep) {
		s.fail(w, r, apierr.NotFound(err.Error()))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}
