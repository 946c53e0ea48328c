package step

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/relay"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// Delivery is one message handed over by the broker.
type Delivery struct {
	Body       []byte
	RoutingKey string
	// MessageID is the AMQP message id, "" when the publisher set none.
	MessageID string
	// Headers are the message's AMQP headers: the broker's
	// x-delivery-count, and what the runtime carries across the delay
	// tiers (see later).
	Headers amqp.Table
	// Unstarted says the source hands the delivery back itself, unstarted,
	// because its consumer stopped (a shutdown, a pause): the runner only
	// records the hand-back, and settles nothing.
	Unstarted bool
	// Ack acknowledges the message; Nack hands it back (requeue) or
	// dead-letters it (no requeue).
	Ack  func() error
	Nack func(requeue bool) error
}

// Source delivers the messages of one queue. Consume blocks until ctx is
// cancelled and every handle call it started has returned.
type Source interface {
	Consume(ctx context.Context, handle func(context.Context, Delivery)) error
}

// Publisher publishes one message and waits for the broker's confirm (the
// outbox's Publisher).
type Publisher = outbox.Publisher

// DelayFunc names the delay-tier exchange for a wanted delay and the delay it
// really gives.
type DelayFunc func(d time.Duration) (exchange string, actual time.Duration)

// Runner consumes one queue and runs each message's step through its route.
type Runner struct {
	cfg     Config
	routes  map[string]Route
	policy  policy
	relay   *relay.Relay
	running atomic.Bool
	// now is the clock decisions are taken by.
	now func() time.Time
	// settle acks and hands back the deliveries (Settler): hand-backs in
	// a row (the database or the broker is down) are spaced out so an
	// outage does not burn through the queue's delivery limit.
	settle Settler
	// claims and commits send the claims and the commits of concurrent
	// deliveries together (combiner).
	claims, commits *combiner
	// label names the step the runner's statements are counted under
	// (store.WithStep): its route's, or its queue's when it serves several.
	label string
}

// NewRunner checks cfg and returns a Runner.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, routes: make(map[string]Route, len(cfg.Routes)), now: time.Now}
	chain := append([]Middleware{Recover(), Tracing(), Logging(), cfg.Metrics.Middleware()}, cfg.Middleware...)
	for _, route := range cfg.Routes {
		route.Handler = Chain(route.Handler, chain...)
		r.routes[route.Step] = route
	}
	r.settle.Pause = cfg.HandBackPause
	r.label = cfg.Queue
	if len(cfg.Routes) == 1 {
		r.label = cfg.Routes[0].Step
	}
	r.policy = policy{maxRetries: cfg.MaxRetries, backoff: cfg.Backoff, lease: cfg.Lease,
		dependencyWait: cfg.DependencyWait, deliveryLimit: cfg.DeliveryLimit}
	r.relay = relay.New(cfg.Pool, cfg.Publisher, cfg.Log, cfg.Metrics.outbox)
	r.claims = newCombiner(cfg.Pool, combineItems, combineFlight)
	r.commits = newCombiner(cfg.Pool, combineItems, combineFlight)
	return r, nil
}

// Worker is the identity this runner claims steps under.
func (r *Runner) Worker() string { return r.cfg.Worker }

// Running reports whether Run is consuming.
func (r *Runner) Running() bool { return r.running.Load() }

// Run consumes until ctx is cancelled, then stops consuming, lets in-flight
// steps finish within the shutdown grace (handing back those that do not)
// and returns nil.
func (r *Runner) Run(ctx context.Context) error {
	for _, route := range r.cfg.Routes {
		r.cfg.Log.Info().Str("step", route.Step).Str("queue", r.cfg.Queue).
			Dur("timeout", route.Timeout).Str("after", route.After).Int("max_retries", r.cfg.MaxRetries).
			Msg("step runtime serving")
	}
	// Work outlives ctx by the shutdown grace.
	workCtx, cancelWork := context.WithCancel(store.WithStep(context.WithoutCancel(ctx), r.label))
	defer cancelWork()
	go func() {
		<-ctx.Done()
		t := time.NewTimer(r.cfg.ShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			r.cfg.Log.Warn().Dur("grace", r.cfg.ShutdownGrace).Msg("shutdown grace over: handing back in-flight steps")
			cancelWork()
		case <-workCtx.Done():
		}
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.relay.DeleteLoop(workCtx) }()
	go func() { defer wg.Done(); r.relay.SweepLoop(ctx, r.cfg.SweepInterval, r.cfg.SweepAge) }()
	r.running.Store(true)
	err := r.cfg.Source.Consume(ctx, func(_ context.Context, d Delivery) { r.handle(workCtx, d) })
	r.running.Store(false)
	cancelWork()
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("consume %s: %w", r.cfg.Queue, err)
	}
	r.cfg.Log.Info().Str("queue", r.cfg.Queue).Msg("step runtime stopped")
	return nil
}

// handle takes one delivery to its end: acked, or handed back. It reads and
// claims the message, then asks the policy what to do (decide.go), does it
// and asks again with what it found, until a decision settles the delivery.
func (r *Runner) handle(ctx context.Context, d Delivery) {
	if d.Unstarted {
		r.recordUnstarted(ctx, d)
		return
	}
	dl := r.read(ctx, d)
	if dl.watch != nil {
		defer dl.watch.Close()
	}
	for {
		dl.facts.Now = r.now()
		dec := r.policy.decide(dl.facts)
		r.note(dl, dec)
		switch dec.Action {
		case actRun:
			r.run(ctx, dl)
		case actRecord:
			r.record(ctx, dl, dec)
		case actAck:
			r.settle.Ack(d, dl.log)
			return
		case actLater:
			r.recordHandBack(ctx, dl, dec)
			r.later(ctx, d, dl.env, dec.Delay, dec.Held, dl.log)
			return
		case actReject:
			r.reject(ctx, d, dl.env, dec.Class, dec.Err, dl.log)
			return
		default: // actHandBack
			if dec.Release {
				r.release(ctx, dl)
			}
			r.recordHandBack(ctx, dl, dec)
			r.settle.HandBack(ctx, d, dl.log)
			return
		}
	}
}

// note logs a decision and counts it in the metrics; the outcome it
// records for a run goes to the run's middleware (Message.OnOutcome). The
// start of a run is the Logging middleware's to log.
func (r *Runner) note(dl *delivery, dec decision) {
	if dec.Metric != "" {
		r.cfg.Metrics.outcome(dl.step(), dec.Metric)
		if dec.Action == actRecord && dl.facts.Commits == 0 && dl.msg != nil {
			dl.msg.decided(dec.Metric)
		}
	}
	if dec.Why == "" || dec.Action == actRun {
		return
	}
	ev := dl.log.WithLevel(levels[dec.Level])
	if dec.Err != nil {
		ev = ev.Err(dec.Err)
	}
	if dec.Class != "" {
		ev = ev.Str("error_class", dec.Class)
	}
	switch {
	case dec.Action == actLater:
		ev = ev.Dur("check_in", dec.Delay)
	case dec.Record == recRetried:
		_, actual := r.cfg.Delay(dec.Delay)
		ev = ev.Dur("retry_in", actual)
	case dec.Record == recWaited:
		_, actual := r.cfg.Delay(dec.Delay)
		ev = ev.Str("wait_reason", dec.WaitReason).Time("wait_until", dec.WaitUntil).Dur("offer_in", actual)
	case dec.Action == actRecord && dl.facts.Commits > 0:
		ev = ev.Str("outcome", string(dl.facts.Recorded))
	}
	ev.Msg(dec.Why)
}

// levels are the log levels of the severities.
var levels = map[severity]zerolog.Level{sevInfo: zerolog.InfoLevel, sevWarn: zerolog.WarnLevel, sevError: zerolog.ErrorLevel}
