package system

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// Registry reads and changes pkg/worker's registry (RegistryOf).
type Registry struct {
	// processes lists the worker processes heard from in the last hour
	// (never nil), as GET /api/workers answers them, and counts the live
	// ones of each step.
	processes func(ctx context.Context) (list any, serving map[string]int, err error)
	// pauses are the steps ever paused, by step.
	pauses func(ctx context.Context) (map[string]pause, error)
	// setPaused pauses or resumes a step on every worker, recorded as by:
	// its new state; apierr.NotFound for no such step.
	setPaused func(ctx context.Context, step string, paused bool, by string) (any, error)
}

// process and pause are what the room reads of pkg/worker's Process and
// Pause: their fields as GET /api/workers and POST
// /api/queues/{step}/pause answer them.
type process struct {
	Status string   `json:"status"`
	Steps  []string `json:"steps"`
}

type pause struct {
	Paused    bool      `json:"paused"`
	ChangedAt time.Time `json:"changedAt"`
	ChangedBy string    `json:"changedBy"`
}

// RegistryOf is the registry on db of pkg/worker's Processes, Pauses and
// SetPaused (and its ErrUnknownStep): pkg/worker stands on the step runtime,
// above the rooms in the import graph, so main passes them in, and the room
// reads a process or a pause by the fields the API answers of it.
func RegistryOf[P, Q any](db store.Querier, processes func(context.Context, store.Querier) ([]P, error),
	pauses func(context.Context, store.Querier) (map[string]Q, error),
	setPaused func(context.Context, store.Querier, string, bool, string) (Q, error), unknown error) Registry {
	return Registry{
		processes: func(ctx context.Context) (any, map[string]int, error) {
			list, err := processes(ctx, db)
			if err != nil {
				return nil, nil, err
			}
			serving, err := servingOf(list)
			return orEmpty(list), serving, err
		},
		pauses: func(ctx context.Context) (map[string]pause, error) {
			all, err := pauses(ctx, db)
			if err != nil {
				return nil, err
			}
			return as[map[string]pause](all)
		},
		setPaused: func(ctx context.Context, step string, paused bool, by string) (any, error) {
			p, err := setPaused(ctx, db, step, paused, by)
			if errors.Is(err, unknown) {
				return nil, apierr.NotFound(err.Error())
			}
			return p, err
		}}
}

// orEmpty is list, an empty one for none.
func orEmpty[P any](list []P) []P {
	if list == nil {
		return []P{}
	}
	return list
}

// servingOf counts, for each step of the pipeline, the processes of list
// that serve it and are neither lost nor stopped.
func servingOf[P any](list []P) (map[string]int, error) {
	procs, err := as[[]process](list)
	serving := map[string]int{}
	for _, p := range procs {
		for _, st := range wire.Pipeline {
			if p.Status != "lost" && p.Status != "stopped" && slices.Contains(p.Steps, st) {
				serving[st]++
			}
		}
	}
	return serving, err
}

// as reads v into a T by their JSON.
func as[T any](v any) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return out, fmt.Errorf("read the workers' registry: %w", err)
	}
	return out, nil
}
