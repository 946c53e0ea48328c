package system

import (
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// QueueView is one step's work queue in GET /api/queues: its depth and
// consumers (the broker's), whether it is paused and by whom, and how many
// live worker processes serve it.
type QueueView struct {
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
func (s Room) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.queueViews(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, map[string]any{"queues": qs, "pausePollSeconds": s.Fleet.PausePoll.Seconds()})
}

func (s Room) queueViews(r *http.Request) ([]QueueView, error) {
	ctx := r.Context()
	pauses, err := s.Fleet.Registry.pauses(ctx)
	if err != nil {
		return nil, err
	}
	_, serving, err := s.Fleet.Registry.processes(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(wire.Pipeline))
	for i, st := range wire.Pipeline {
		names[i] = wire.RoutingKey(st)
	}
	depth, err := s.Queues.Inspect(ctx, names)
	if err != nil {
		return nil, apierr.UnavailableBecause("the broker cannot be read now; try again", err)
	}
	out := make([]QueueView, len(wire.Pipeline))
	for i, st := range wire.Pipeline {
		q := depth[names[i]]
		v := QueueView{Step: st, Queue: names[i], Ready: q.Ready, Consumers: q.Consumers, Missing: q.Missing}
		if p, ok := pauses[st]; ok {
			v.Paused, v.ChangedAt, v.ChangedBy = p.Paused, &p.ChangedAt, p.ChangedBy
		}
		v.Workers = serving[st]
		out[i] = v
	}
	return out, nil
}

// pauseQueue answers POST /api/queues/{step}/pause: the step's workers on
// every replica cancel their consumers within Fleet.PausePoll (steps
// running then finish); its messages wait in the queue.
func (s Room) pauseQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, true) }

// resumeQueue answers POST /api/queues/{step}/resume.
func (s Room) resumeQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

func (s Room) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	p, err := s.Fleet.Registry.setPaused(r.Context(), r.PathValue("step"), paused, route.PrincipalOf(r).Name)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, p)
}

// listWorkers answers GET /api/workers: every worker process heard from in
// the last hour (pkg/worker's heartbeats, Fleet.Processes), with what it runs now.
func (s Room) listWorkers(w http.ResponseWriter, r *http.Request) {
	procs, _, err := s.Fleet.Registry.processes(r.Context())
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, map[string]any{"workers": procs,
		"heartbeatSeconds": s.Fleet.Heartbeat.Seconds(), "lostAfterSeconds": s.Fleet.LostAfter.Seconds()})
}
