// Package recovery is the start-up recovery every long-running dubflow
// service runs before it serves: seed 003's performStartupRecovery, on
// dubflow's tables and broker. It cleans up what dead processes left (the
// expired engine reservations, the attempts of ended tasks still marked
// running, the parts held past their window, the outbox rows nobody
// published), counts the in-flight work whose lease ran out (the broker
// delivers it again and the claim takes it over), declares the queues
// again, and runs the service's own passes (the dispatcher's reservations
// and counters). The reconciler does the same periodically; this is the
// explicit pass at start, shared by every service. Every step is safe
// while other replicas run: each locks what it touches.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/service"
)

// Ages below which AtStart leaves things to their owners: an outbox row
// younger than OutboxAge may be on its way (its writer publishes it at
// once), a part held for less than HeldAge may be let in by the success
// that is committing.
const (
	OutboxAge = 10 * time.Second
	HeldAge   = 30 * time.Second
)

// limit bounds what one kind of clean-up handles at start; the reconciler
// takes the rest.
const limit = 1000

// Pass is a service's own part of the recovery: it returns its counts by
// name.
type Pass struct {
	Name string
	Run  func(ctx context.Context) (map[string]int, error)
}

// Report counts what AtStart did.
type Report struct {
	// QueuesDeclared: the broker topology's queues, declared again.
	QueuesDeclared int
	// ReservationsReaped: engine reservations of dead replicas deleted
	// (their slots freed).
	ReservationsReaped int
	// AttemptsClosed: running attempts of ended tasks whose lease ran out,
	// closed as failed.
	AttemptsClosed int
	// LeasesExpired: running attempts of live tasks whose lease ran out,
	// left to the broker's redelivery and the reconciler.
	LeasesExpired int
	// PartsReleased: held parts let into windows with room.
	PartsReleased int
	// OutboxPublished: outbox rows older than OutboxAge published.
	OutboxPublished int
	// Passes are the service's own passes' counts, by pass and name.
	Passes map[string]map[string]int
}

// AtStart runs the start-up recovery for p, then the service's own passes,
// and logs what it did with the counts. A step that fails is logged and
// the others still run; the error joins every failure.
func AtStart(ctx context.Context, p *service.Process, passes ...Pass) (Report, error) {
	r := Report{Passes: map[string]map[string]int{}}
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	note(r.declare(ctx, p))
	var err error
	r.ReservationsReaped, err = pool.ReapExpired(ctx, p.Pool, time.Now())
	note(err)
	note(r.inFlight(ctx, p))
	sent, _, err := outbox.Sweep(ctx, p.Pool, p.Publisher(), OutboxAge, limit)
	r.OutboxPublished += len(sent)
	note(err)
	for _, ps := range passes {
		counts, err := ps.Run(ctx)
		r.Passes[ps.Name] = counts
		note(err)
	}
	err = errors.Join(errs...)
	r.log(p, err)
	return r, err
}

// declare declares the broker topology again on the publishing connection.
func (r *Report) declare(ctx context.Context, p *service.Process) error {
	ch, err := p.PublishConn().Channel(ctx)
	if err != nil {
		return fmt.Errorf("declare queues: %w", err)
	}
	defer ch.Close()
	if err := p.Topology.Declare(ch); err != nil {
		return fmt.Errorf("declare queues: %w", err)
	}
	r.QueuesDeclared = len(p.Topology.Queues())
	return nil
}

// inFlight closes the ended tasks' attempts left running, counts the live
// ones whose lease ran out, and lets in the parts held past HeldAge.
func (r *Report) inFlight(ctx context.Context, p *service.Process) error {
	closed, err := attempt.CloseEnded(ctx, p.Pool, 0, limit, nil)
	r.AttemptsClosed = len(closed)
	if err != nil {
		return err
	}
	if r.LeasesExpired, err = attempt.CountExpired(ctx, p.Pool); err != nil {
		return err
	}
	stuck, err := attempt.ReleaseStuck(ctx, p.Pool, HeldAge, limit, nil)
	var ids []int64
	for _, w := range stuck {
		ids = append(ids, w.Released...)
	}
	r.PartsReleased = len(ids)
	if ferr := outbox.Flush(ctx, p.Pool, p.Publisher(), ids); ferr != nil {
		return errors.Join(err, fmt.Errorf("publish released parts (the outbox sweep will): %w", ferr))
	}
	r.OutboxPublished += len(ids)
	return err
}

// log writes the report as one line.
func (r Report) log(p *service.Process, err error) {
	ev := p.Log.Info()
	if err != nil {
		ev = p.Log.Warn().Err(err)
	}
	ev = ev.Int("queues_declared", r.QueuesDeclared).Int("reservations_reaped", r.ReservationsReaped).
		Int("attempts_closed", r.AttemptsClosed).Int("leases_expired", r.LeasesExpired).
		Int("parts_released", r.PartsReleased).Int("outbox_published", r.OutboxPublished)
	for _, name := range slices.Sorted(maps.Keys(r.Passes)) {
		for _, k := range slices.Sorted(maps.Keys(r.Passes[name])) {
			ev = ev.Int(name+"_"+k, r.Passes[name][k])
		}
	}
	ev.Msg("start-up recovery done")
}
