package system

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
)

// A registry's process and pause as a package of its own would have them:
// the room reads them by their JSON fields.
type proc struct {
	ID     string   `json:"id"`
	Steps  []string `json:"steps"`
	Status string   `json:"status"`
}

type paused struct {
	Step      string    `json:"step"`
	Paused    bool      `json:"paused"`
	ChangedAt time.Time `json:"changedAt"`
	ChangedBy string    `json:"changedBy"`
}

var errNoStep = errors.New("no such step")

// TestRegistryReadsProcessesAndPausesByTheirFields: the processes are
// answered as they are (an empty list for none) and each step counts its
// live ones; the pauses are read by step; an unknown step is 404.
func TestRegistryReadsProcessesAndPausesByTheirFields(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var list []proc
	reg := RegistryOf[proc, paused](nil,
		func(context.Context, store.Querier) ([]proc, error) { return list, nil },
		func(context.Context, store.Querier) (map[string]paused, error) {
			return map[string]paused{"tts": {Step: "tts", Paused: true, ChangedAt: at, ChangedBy: "ops"}}, nil
		},
		func(_ context.Context, _ store.Querier, step string, p bool, by string) (paused, error) {
			if step != "asr" {
				return paused{}, errNoStep
			}
			return paused{Step: step, Paused: p, ChangedBy: by}, nil
		}, errNoStep)
	ctx := context.Background()
	if got, serving, err := reg.processes(ctx); err != nil || got.([]proc) == nil || len(serving) != 0 {
		t.Fatalf("no processes: %#v %v %v, want an empty list", got, serving, err)
	}
	list = []proc{{ID: "a", Steps: []string{"asr", "tts"}, Status: "busy"}, {ID: "b", Steps: []string{"asr"}, Status: "idle"},
		{ID: "c", Steps: []string{"asr"}, Status: "lost"}, {ID: "d", Steps: []string{"tts"}, Status: "stopped"}}
	if _, serving, err := reg.processes(ctx); err != nil || serving["asr"] != 2 || serving["tts"] != 1 {
		t.Errorf("serving %v (%v), want asr 2, tts 1", serving, err)
	}
	pauses, err := reg.pauses(ctx)
	if want := (pause{Paused: true, ChangedAt: at, ChangedBy: "ops"}); err != nil || !pauses["tts"].ChangedAt.Equal(at) ||
		pauses["tts"].Paused != want.Paused || pauses["tts"].ChangedBy != want.ChangedBy || pauses["asr"].Paused {
		t.Errorf("pauses %+v (%v), want tts paused by ops", pauses, err)
	}
	if p, err := reg.setPaused(ctx, "asr", true, "ops"); err != nil || p.(paused) != (paused{Step: "asr", Paused: true, ChangedBy: "ops"}) {
		t.Errorf("pause asr: %+v %v", p, err)
	}
	if _, err := reg.setPaused(ctx, "nope", true, "ops"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("pause an unknown step: %v, want 404", err)
	}
}

func isStatus(err error, status int) bool {
	ae, ok := apierr.As(err)
	return ok && ae.Status == status
}

// TestJudge: a dependency down is unhealthy; a step without workers that
// is not paused, dead letters nobody records or stuck tasks are degraded;
// a paused step without workers is no reason.
func TestJudge(t *testing.T) {
	t.Parallel()
	queues := []inspect.State{{Name: "task.asr", Kind: "work", Consumers: 0, Ready: 3},
		{Name: "task.tts", Kind: "work", Consumers: 0}, {Name: "task.dlq", Kind: "dlq", Ready: 2}}
	h := HealthReport{Status: "healthy", Queues: queues, Services: servicesOf(queues, map[string]int{}),
		Dependencies: map[string]string{"postgres": "ok", "rabbitmq": "ok", "objectStore": "ok"}}
	h.Services.Steps[1].Paused = true
	h.judge()
	if h.Status != "degraded" || len(h.Reasons) != 2 || !strings.Contains(h.Reasons[0], "no workers consume task.asr (3 messages waiting)") ||
		!strings.Contains(h.Reasons[1], "2 dead letters wait") {
		t.Errorf("%s %q", h.Status, h.Reasons)
	}
	h = HealthReport{Status: "healthy", Dependencies: map[string]string{"postgres": "down", "rabbitmq": "ok", "objectStore": "ok"}}
	h.judge()
	if h.Status != "unhealthy" || len(h.Reasons) != 1 || h.Reasons[0] != "postgres: down" {
		t.Errorf("%s %q", h.Status, h.Reasons)
	}
}
