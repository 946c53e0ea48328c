// Package worker runs one step of the dubbing chain on the service
// lifecycle (pkg/service): it adds the object store, consumes the step's
// queue with the step runtime (pkg/step) and reports the consumers on
// /readyz. A worker's main builds its handler and calls Run; everything else
// lives here and in pkg/service, once.
package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/recovery"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is a worker's configuration: it embeds config.Common, checks
// itself and bounds one run of its step.
type Config interface {
	config.Service
	Timeout() time.Duration
}

// Deps are the connections a worker works with (the object store among
// them).
type Deps struct {
	*service.Process
	// jobs run beside the consumers (Announce).
	jobs []service.Job
	// pools are the engine pools opened (EnginePool): their last releases
	// are written when the worker stops.
	pools []*pool.Pool
	// environ is the environment Run was given (its main read it): where
	// EnginePool looks up the pools' api_key_env names.
	environ map[string]string
}

// Run serves stepName, the service of the same name: it reads cfg from
// environ, starts the process with the object store, builds the step's
// handler with newHandler and consumes the step's work queue (named after
// its routing key) until ctx is cancelled. The step runs after the
// pipeline's previous step (wire.Previous) and within cfg.Timeout().
func Run(ctx context.Context, environ map[string]string, stepName string, cfg Config,
	newHandler func(d *Deps) (step.Handler, error)) error {
	p, err := service.Start(ctx, stepName, environ, cfg, service.WithBlob())
	if err != nil {
		return err
	}
	defer p.Close()
	d := &Deps{Process: p, environ: environ}
	defer d.flushPools()
	h, err := newHandler(d)
	if err != nil {
		return err
	}
	return d.Serve(ctx, wire.RoutingKey(stepName), []step.Route{{
		Step: stepName, After: wire.Previous(stepName), Timeout: cfg.Timeout(), Handler: h,
	}})
}

// Serve removes the service's stale scratch folders, then consumes queue
// with routes until ctx is cancelled, serving the ops endpoints beside it,
// and returns after a graceful stop.
//
// It refuses a route whose timeout does not end well before the broker's
// consumer timeout (config.Common.CheckStepTimeout).
func (d *Deps) Serve(ctx context.Context, queue string, routes []step.Route) error {
	for _, r := range routes {
		if err := d.Config.CheckStepTimeout(r.Step, r.Timeout); err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	d.removeStaleTemp(routes)
	// What dead workers left is cleaned up (and logged) before consuming;
	// a failure is the reconciler's to retry.
	recovery.AtStart(ctx, d.Process)
	stepName := wire.StepOfQueue(queue)
	// Read the pauses before consuming: a paused step takes nothing at start.
	pauses := newPauseWatch(d.Pool, d.Log)
	pauses.poll(ctx)
	track := newTracker()
	// One LISTEN per process tells every consumer's running step when its
	// task was cancelled or failed (task.Watcher).
	watch := task.NewWatcher(d.Pool, d.Log)
	runners, err := Runners(ctx, d.Process, queue, routes, func(sc *step.Config) {
		sc.Source = pauses.source(stepName, sc.Source)
		sc.Routes = tracked(track, sc.Worker, sc.Routes)
		sc.Watch = watch
	})
	if err != nil {
		return err
	}
	conn, err := d.Consumer(ctx)
	if err != nil {
		return err
	}
	d.Ready("consumer", func(ctx context.Context) error {
		if pauses.Paused(stepName) {
			return nil // not consuming on purpose
		}
		return consuming(runners, conn, queue)(ctx)
	})
	d.exportState(stepName, pauses, track)
	hb := &heartbeat{db: d.Pool, log: d.Log, id: strings.TrimSuffix(runners[0].Worker(), "-1"), service: d.Name,
		steps: routeSteps(routes), consumers: len(runners), started: time.Now().UTC(), track: track}
	return d.Run(ctx, append(Jobs(runners), append(d.jobs, pauses.run, hb.run, watch.Run)...)...)
}

// tracked returns a copy of routes whose handlers tell track what consumer
// runs.
func tracked(track *tracker, consumer string, routes []step.Route) []step.Route {
	out := slices.Clone(routes)
	for i := range out {
		out[i].Handler = track.wrap(consumer, out[i].Handler)
	}
	return out
}

// routeSteps names the steps routes serve.
func routeSteps(routes []step.Route) []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.Step
	}
	return out
}

// Runners returns the step runners that consume queue with routes on p's
// consuming connection, and adds their "consumer" readiness check. The
// queue is consumed by WORKER_CONCURRENCY consumers, each handling one
// message at a time under a worker id of its own (WorkerIDs): a lease names
// the one consumer that holds it, so a consumer of the same process can
// never take over a step another one is still running as if it were its
// own. tune, when not nil, adjusts each runner's configuration.
func Runners(ctx context.Context, p *service.Process, queue string, routes []step.Route,
	tune func(*step.Config)) ([]*step.Runner, error) {
	conn, err := p.Consumer(ctx)
	if err != nil {
		return nil, err
	}
	cfg := p.Config
	metrics := step.NewMetrics(p.Registry)
	ids := WorkerIDs(p.Name, max(cfg.Consumers(p.Name), 1))
	runners := make([]*step.Runner, len(ids))
	for i, id := range ids {
		sc := step.Config{
			Queue:  queue,
			Routes: routes,
			Pool:   p.Pool,
			Source: step.RunnerSource(conn, broker.ConsumeOptions{
				Queue: queue, Prefetch: 1, Concurrency: 1, Tag: fmt.Sprintf("%s-%d", p.Name, i+1),
			}),
			Worker:        id,
			Publisher:     p.Publisher(),
			Delay:         p.Topology.DelayExchange,
			DLQ:           wire.QueueDLQ,
			MaxRetries:    cfg.MaxRetries,
			MaxWaits:      func() int { return p.Settings.Int(setting.MaxEngineWaits) },
			DeliveryLimit: p.Topology.DeliveryLimit,
			Lease:         cfg.Lease(),
			ShutdownGrace: cfg.ShutdownGrace(),
			Log:           p.Log.With().Str("worker", id).Logger(),
			Metrics:       metrics,
		}
		if tune != nil {
			tune(&sc)
		}
		if runners[i], err = step.NewRunner(sc); err != nil {
			return nil, err
		}
	}
	p.Ready("consumer", consuming(runners, conn, queue))
	return runners, nil
}

// consuming is the readiness check of runners consuming queue on conn.
func consuming(runners []*step.Runner, conn *broker.Conn, queue string) func(context.Context) error {
	return func(context.Context) error {
		for _, r := range runners {
			if !r.Running() || !conn.Consuming() {
				return errors.New("not consuming " + queue)
			}
		}
		return nil
	}
}

// Jobs returns the runners as jobs of a service.Process.
func Jobs(runners []*step.Runner) []service.Job {
	jobs := make([]service.Job, len(runners))
	for i, r := range runners {
		jobs[i] = r.Run
	}
	return jobs
}

// WorkerIDs returns n worker ids for one process of service, one per
// consumer: service, host, process id, a random tag (a restarted process with
// the same pid is someone else) and the consumer's number.
func WorkerIDs(service string, n int) []string {
	host, _ := os.Hostname()
	base := fmt.Sprintf("%s-%s-%d-%s", service, host, os.Getpid(), uuid.NewString()[:8])
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", base, i+1)
	}
	return ids
}

// Main is a worker's main: service.Main, under the step's name (a worker's
// package keeps that name in a constant called service).
func Main(stepName string, run func(ctx context.Context, environ map[string]string) error) {
	service.Main(stepName, run)
}

// Step returns a worker's run function: Run with a fresh configuration of
// type T on each call, and newHandler given that configuration.
func Step[T any, C interface {
	*T
	Config
}](stepName string, newHandler func(cfg C, d *Deps) (step.Handler, error)) func(ctx context.Context, environ map[string]string) error {
	return func(ctx context.Context, environ map[string]string) error {
		cfg := C(new(T))
		return Run(ctx, environ, stepName, cfg, func(d *Deps) (step.Handler, error) { return newHandler(cfg, d) })
	}
}

// exportState exports whether the step is paused here and how many
// consumers run a step now.
func (d *Deps) exportState(stepName string, pauses *pauseWatch, track *tracker) {
	d.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "dubflow_step_paused",
			Help:        "1 while an operator has paused the step (its consumers are cancelled), else 0.",
			ConstLabels: prometheus.Labels{"step": stepName},
		}, func() float64 {
			if pauses.Paused(stepName) {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "dubflow_worker_busy_consumers",
			Help:        "Consumers of the worker process running a step now.",
			ConstLabels: prometheus.Labels{"step": stepName},
		}, func() float64 { return float64(len(track.snapshot())) }))
}
