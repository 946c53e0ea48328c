package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/rs/zerolog"
)

// PausePoll is how often a worker reads which steps are paused: a pause
// or a resume takes effect on every replica within about this long (the
// consumers are cancelled at once; a step running then still finishes).
const PausePoll = time.Second

// ErrUnknownStep is SetPaused's answer for a name that is no step of the
// pipeline.
var ErrUnknownStep = errors.New("no such step")

// Pause is one step's pause state (table queue_pauses).
type Pause struct {
	Step      string    `json:"step"`
	Paused    bool      `json:"paused"`
	ChangedAt time.Time `json:"changedAt"`
	ChangedBy string    `json:"changedBy"`
}

// SetPaused pauses (or resumes) stepName for every worker of it, recording
// who did it, and returns the new state.
func SetPaused(ctx context.Context, db store.Querier, stepName string, paused bool, by string) (Pause, error) {
	if !slices.Contains(wire.Pipeline, stepName) {
		return Pause{}, fmt.Errorf("%w %q (one of %v)", ErrUnknownStep, stepName, wire.Pipeline)
	}
	p := Pause{Step: stepName, Paused: paused, ChangedBy: by}
	err := db.QueryRow(ctx, `INSERT INTO queue_pauses (step, paused, changed_by) VALUES ($1, $2, $3)
		ON CONFLICT (step) DO UPDATE SET paused = EXCLUDED.paused, changed_by = EXCLUDED.changed_by, changed_at = now()
		RETURNING changed_at`, stepName, paused, by).Scan(&p.ChangedAt)
	if err != nil {
		return Pause{}, fmt.Errorf("set pause of %s: %w", stepName, err)
	}
	return p, nil
}

// Pauses returns the state of every step that was ever paused, by step.
func Pauses(ctx context.Context, db store.Querier) (map[string]Pause, error) {
	rows, err := db.Query(ctx, `SELECT step, paused, changed_at, changed_by FROM queue_pauses`)
	if err != nil {
		return nil, fmt.Errorf("read paused steps: %w", err)
	}
	defer rows.Close()
	out := map[string]Pause{}
	for rows.Next() {
		var p Pause
		if err := rows.Scan(&p.Step, &p.Paused, &p.ChangedAt, &p.ChangedBy); err != nil {
			return nil, fmt.Errorf("read paused steps: %w", err)
		}
		out[p.Step] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read paused steps: %w", err)
	}
	return out, nil
}

// PausedSteps lists the steps paused now.
func PausedSteps(ctx context.Context, db store.Querier) ([]string, error) {
	all, err := Pauses(ctx, db)
	if err != nil {
		return nil, err
	}
	var out []string
	for s, p := range all {
		if p.Paused {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// pauseWatch is a process's view of which steps are paused, read from
// queue_pauses every PausePoll. changed is closed and replaced on every
// change, so that waiters learn of it at once.
type pauseWatch struct {
	db  store.Querier
	log zerolog.Logger

	mu      sync.Mutex
	paused  map[string]bool
	changed chan struct{}
}

func newPauseWatch(db store.Querier, log zerolog.Logger) *pauseWatch {
	return &pauseWatch{db: db, log: log, paused: map[string]bool{}, changed: make(chan struct{})}
}

// state reports whether stepName is paused, and a channel closed at the
// next change of any step.
func (w *pauseWatch) state(stepName string) (bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused[stepName], w.changed
}

// Paused reports whether stepName is paused now.
func (w *pauseWatch) Paused(stepName string) bool {
	p, _ := w.state(stepName)
	return p
}

// poll reads the paused steps once; a failure keeps the last state (an
// outage of the database neither pauses nor resumes anything).
func (w *pauseWatch) poll(ctx context.Context) {
	steps, err := PausedSteps(ctx, w.db)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("read paused steps; keeping the last state")
		}
		return
	}
	now := make(map[string]bool, len(steps))
	for _, s := range steps {
		now[s] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if maps.Equal(now, w.paused) {
		return
	}
	for s := range now {
		if !w.paused[s] {
			w.log.Info().Str("step", s).Msg("step paused: consumers cancelled")
		}
	}
	for s := range w.paused {
		if !now[s] {
			w.log.Info().Str("step", s).Msg("step resumed: consuming again")
		}
	}
	w.paused = now
	close(w.changed)
	w.changed = make(chan struct{})
}

// run polls until ctx ends.
func (w *pauseWatch) run(ctx context.Context) error {
	ops.Every(ctx, PausePoll, w.poll)
	return nil
}

// source wraps src so that it consumes only while stepName is not paused:
// a pause cancels the consumer (src's Consume returns after the deliveries
// being handled have settled), a resume subscribes again.
func (w *pauseWatch) source(stepName string, src step.Source) step.Source {
	return pausedSource{w: w, step: stepName, src: src}
}

type pausedSource struct {
	w    *pauseWatch
	step string
	src  step.Source
}

// Consume consumes while the step is not paused, until ctx ends.
func (s pausedSource) Consume(ctx context.Context, handle func(context.Context, step.Delivery)) error {
	for {
		paused, changed := s.w.state(s.step)
		if paused {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				continue
			}
		}
		sub, cancel := context.WithCancel(ctx)
		go s.cancelOnPause(sub, cancel, changed)
		err := s.src.Consume(sub, handle)
		cancel()
		if ctx.Err() != nil || err != nil {
			return err
		}
	}
}

// cancelOnPause cancels a consumer's context when its step is paused.
func (s pausedSource) cancelOnPause(ctx context.Context, cancel context.CancelFunc, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		var paused bool
		if paused, changed = s.w.state(s.step); paused {
			cancel()
			return
		}
	}
}
