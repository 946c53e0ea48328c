package step

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// Delivery is one message handed over by the broker.
type Delivery struct {
	Body       []byte
	RoutingKey string
	// Headers are the message's AMQP headers: the broker's
	// x-delivery-count, and what the runtime carries across the delay
	// tiers (see later).
	Headers amqp.Table
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

// Config configures a Runner.
type Config struct {
	// Queue names the consumed queue, for logs and metrics.
	Queue  string
	Routes []Route
	Pool   *pgxpool.Pool
	Source Source
	// Publisher publishes on a connection of its own (not Source's).
	Publisher Publisher
	Delay     DelayFunc
	// DLQ is the dead-letter queue, published to through the default exchange.
	DLQ string
	// Worker identifies this process in task_steps; default host-pid-random.
	Worker string
	// MaxRetries is the retry budget: how many times a transiently failed
	// step is tried again before it is dead-lettered; zero means never. The
	// services use 3, the seed's 最大重试次数: a step runs at most 4 times,
	// retried after 1s, 2s and 4s.
	MaxRetries int
	// Backoff gives the delay after failed try n (1-based) of a budget;
	// default 1s, 2s, 4s, ... doubling.
	Backoff func(n int) time.Duration
	// Lease is how long a claim lives without a heartbeat (default 30s).
	Lease time.Duration
	// DependencyWait bounds how long a message waits for its predecessor
	// step before it is dead-lettered (default 1h).
	DependencyWait time.Duration
	// DeliveryLimit is the queue's x-delivery-limit (default
	// broker.DefaultDeliveryLimit). The runtime dead-letters a message
	// handed back this often, counting the hand-backs before each trip
	// through a delay tier, which the broker's count forgets.
	DeliveryLimit int
	// SweepInterval and SweepAge drive the outbox sweep (defaults 2s, 10s).
	SweepInterval, SweepAge time.Duration
	// ShutdownGrace is how long in-flight steps may finish after shutdown
	// begins before their contexts are cancelled (default 30s).
	ShutdownGrace time.Duration
	Log           zerolog.Logger
	Metrics       *Metrics
}

func (c *Config) defaults() error {
	if c.Pool == nil || c.Source == nil || c.Publisher == nil || c.Delay == nil {
		return errors.New("step runner: Pool, Source, Publisher and Delay are required")
	}
	if len(c.Routes) == 0 {
		return errors.New("step runner: no routes")
	}
	if c.DLQ == "" {
		c.DLQ = "task.dlq"
	}
	if c.Worker == "" {
		host, _ := os.Hostname()
		c.Worker = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.MaxRetries < 0 {
		return errors.New("step runner: MaxRetries must not be negative")
	}
	if c.Backoff == nil {
		c.Backoff = func(n int) time.Duration { return time.Second << min(n-1, 6) }
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.DependencyWait <= 0 {
		c.DependencyWait = time.Hour
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = broker.DefaultDeliveryLimit
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 2 * time.Second
	}
	if c.SweepAge <= 0 {
		c.SweepAge = 10 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	for _, r := range c.Routes {
		if r.Step == "" || r.Handler == nil {
			return fmt.Errorf("step runner: route %q has no step name or handler", r.Step)
		}
		if r.Timeout <= 0 {
			return fmt.Errorf("step runner: route %q has no timeout", r.Step)
		}
	}
	return nil
}

// Runner consumes one queue and runs each message's step through its route.
type Runner struct {
	cfg     Config
	routes  map[string]Route
	relay   *outbox.Relay
	running atomic.Bool
	// troubles counts hand-backs in a row (the database or the broker is
	// down); it spaces them out so an outage does not burn through the
	// queue's delivery limit.
	troubles atomic.Int32
}

// NewRunner checks cfg and returns a Runner.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, routes: make(map[string]Route, len(cfg.Routes))}
	for _, route := range cfg.Routes {
		r.routes[route.Step] = route
	}
	r.relay = outbox.NewRelay(cfg.Pool, cfg.Publisher, cfg.Log, cfg.Metrics.outbox)
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
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
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

// handle takes one delivery to its end: acked, or handed back.
func (r *Runner) handle(ctx context.Context, d Delivery) {
	env, err := wire.Decode(d.Body)
	if err != nil {
		// What can be read of it still names the task to fail, if any.
		r.reject(ctx, d, peek(d.Body), wire.ClassInvalid, fmt.Errorf("invalid message: %w", err))
		return
	}
	log := r.cfg.Log.With().Str("task_id", env.TaskID.String()).Str("step", env.Step).
		Int("attempt", env.Attempt).Str("trace_id", env.TraceID).Logger()
	route, ok := r.routes[env.Step]
	if !ok {
		r.reject(ctx, d, env, wire.ClassInvalid, fmt.Errorf("invalid message: step %q is not served on queue %s", env.Step, r.cfg.Queue))
		return
	}
	part, err := PartOf(env)
	if err != nil {
		r.reject(ctx, d, env, wire.ClassInvalid, fmt.Errorf("invalid message: %w", err))
		return
	}
	key := store.StepKey{TaskID: env.TaskID, Step: env.Step, Part: part, Attempt: env.Attempt}
	claim, err := store.ClaimStep(ctx, r.cfg.Pool, key, r.cfg.Worker, r.cfg.Lease, route.After, d.Body)
	if err != nil {
		// The database is unreachable: hand the message back and slow down.
		log.Error().Err(err).Msg("claim failed; message handed back")
		r.cfg.Metrics.outcome(env.Step, "claim_error")
		r.handBack(ctx, d, log)
		return
	}
	switch claim.Outcome {
	case store.Done, store.Finished:
		log.Info().Str("part", part).Str("outcome", claim.Outcome).Msg("duplicate message skipped")
		r.cfg.Metrics.outcome(env.Step, "duplicate")
		r.ack(d, log)
	case store.Waiting:
		if age := time.Since(env.CreatedAt); age > r.cfg.DependencyWait {
			r.reject(ctx, d, env, wire.ClassPermanent, fmt.Errorf("step %s still waits for %s after %s", env.Step, route.After, age.Round(time.Second)))
			return
		}
		log.Info().Str("after", route.After).Msg("predecessor not done; message waits")
		r.cfg.Metrics.outcome(env.Step, "waiting")
		r.later(ctx, d, env, waitDelay(time.Since(env.CreatedAt)), false, log)
	case store.Held:
		if since, ok := heldSince(d.Headers); ok {
			if held, bound := time.Since(since), route.Timeout+3*r.cfg.Lease; held > bound {
				r.reject(ctx, d, env, wire.ClassTransient, fmt.Errorf("step %s held by another attempt for %s, longer than a step may run (%s)", env.Step, held.Round(time.Second), bound))
				return
			}
		}
		wait := time.Until(claim.HeldUntil)
		log.Info().Time("held_until", claim.HeldUntil).Msg("another worker holds the step; checking again later")
		r.cfg.Metrics.outcome(env.Step, "held")
		r.later(ctx, d, env, min(max(wait, time.Second), r.cfg.Lease), true, log)
	case store.Claimed:
		if n := handBacks(d.Headers); n >= r.cfg.DeliveryLimit {
			// Counted across the delay tiers, which the broker's own
			// delivery limit forgets.
			log.Error().Int("hand_backs", n).Msg("message handed back too often; not run again")
			herr := fault.Permanent(fmt.Errorf("step %s handed back %d times without an outcome (the database or the broker kept failing)", env.Step, n))
			r.settle(ctx, d, env, route, claim, &Message{Envelope: env, Part: part, Log: log}, herr, 0, log)
			return
		}
		r.run(ctx, d, env, route, part, claim, log)
	default:
		log.Error().Str("outcome", claim.Outcome).Msg("unknown claim outcome; message handed back")
		r.handBack(ctx, d, log)
	}
}

// waitDelay spaces the checks of a message that waits for its predecessor:
// soon at first, then at most once a minute.
func waitDelay(age time.Duration) time.Duration {
	return min(max(age/4, time.Second), time.Minute)
}

// run executes a claimed step and commits its outcome.
func (r *Runner) run(ctx context.Context, d Delivery, env *wire.Envelope, route Route, part string, claim store.Claim, log zerolog.Logger) {
	msg := &Message{Envelope: env, Part: part, Log: log}
	start := time.Now()
	log.Info().Str("part", part).Dur("timeout", route.Timeout).Msg("step started")
	runCtx, cancel := context.WithTimeoutCause(ctx, route.Timeout,
		fmt.Errorf("step %s timed out after %s: %w", env.Step, route.Timeout, context.DeadlineExceeded))
	lost := r.heartbeat(runCtx, cancel, claim.StepID, log)
	err := r.call(runCtx, route.Handler, msg)
	if err != nil && runCtx.Err() != nil && !errors.Is(err, context.Cause(runCtx)) {
		err = fmt.Errorf("%w (%w)", err, context.Cause(runCtx))
	}
	cancel()
	switch lost.Load() {
	case leaseLost:
		log.Warn().Msg("lease lost during the step; another worker owns it now")
		r.cfg.Metrics.outcome(env.Step, "lease_lost")
		r.ack(d, log)
		return
	case claimLost:
		// Nobody else holds the attempt: its row is gone (a claim lost in
		// a database crash). Retry, never ack.
		log.Warn().Msg("claim lost during the step (a database crash?); message handed back")
		r.cfg.Metrics.outcome(env.Step, "claim_lost")
		r.handBack(ctx, d, log)
		return
	}
	if err != nil && ctx.Err() != nil {
		// Shutdown cut the step short: hand it back for another worker.
		if rerr := store.ReleaseLease(context.WithoutCancel(ctx), r.cfg.Pool, claim.StepID, r.cfg.Worker); rerr != nil {
			log.Warn().Err(rerr).Msg("release lease")
		}
		log.Warn().Err(err).Msg("step interrupted by shutdown; handed back")
		r.cfg.Metrics.outcome(env.Step, "handed_back")
		r.handBack(ctx, d, log)
		return
	}
	r.settle(ctx, d, env, route, claim, msg, err, time.Since(start), log)
}

// settle commits the outcome of a claimed attempt — the handler's result
// herr, after elapsed — relays the messages it added and settles the
// delivery.
func (r *Runner) settle(ctx context.Context, d Delivery, env *wire.Envelope, route Route, claim store.Claim, msg *Message, herr error, elapsed time.Duration, log zerolog.Logger) {
	outcome, stmts := r.outcome(env, route, claim, msg, herr, log)
	r.cfg.Metrics.observe(env.Step, outcome, elapsed)
	fns := msg.fns
	if outcome != "succeeded" && outcome != "parked" {
		fns = nil
	}
	commitCtx := context.WithoutCancel(ctx)
	out, cerr := commit(commitCtx, r.cfg.Pool, fns, stmts)
	if cerr = store.MapError(cerr); cerr != nil && !settled(cerr) && !errors.Is(cerr, task.ErrRefused) {
		// The outcome cannot be committed (a statement the handler staged
		// fails, say). Record the attempt as failed for that reason
		// instead: a commit that keeps failing uses up the retry budget and
		// ends in the DLQ, rather than re-running the step forever.
		log.Error().Err(cerr).Str("outcome", outcome).Msg("commit failed; recording the attempt as failed")
		r.cfg.Metrics.outcome(env.Step, "commit_error")
		outcome, stmts = r.outcome(env, route, claim, msg, fmt.Errorf("commit %s outcome: %w", outcome, cerr), log)
		out, cerr = commit(commitCtx, r.cfg.Pool, nil, stmts)
		cerr = store.MapError(cerr)
	}
	if errors.Is(cerr, task.ErrRefused) {
		// The task's status refuses the step's change of it (the task was
		// cancelled or failed while the step ran): nothing the step staged
		// is committed; the attempt ends failed with the refusal as its
		// reason, without retry or dead letter.
		log.Warn().Err(cerr).Str("outcome", outcome).Msg("task refused the step's outcome; attempt closed")
		r.cfg.Metrics.outcome(env.Step, "refused")
		_, cerr = commit(commitCtx, r.cfg.Pool, nil, []stmt{r.finish(claim, store.StatusFailed, cerr.Error())})
		cerr = store.MapError(cerr)
		out = nil
	}
	if cerr != nil {
		switch {
		case errors.Is(cerr, store.ErrClaimLost):
			log.Warn().Err(cerr).Msg("claim lost (a database crash?); message handed back")
			r.cfg.Metrics.outcome(env.Step, "claim_lost")
			r.handBack(ctx, d, log)
		case settled(cerr):
			log.Warn().Err(cerr).Msg("step outcome discarded")
			r.cfg.Metrics.outcome(env.Step, "lease_lost")
			r.ack(d, log)
		default:
			// The database is unreachable: free the attempt for the next
			// delivery and hand the message back.
			if rerr := store.ReleaseLease(commitCtx, r.cfg.Pool, claim.StepID, r.cfg.Worker); rerr != nil {
				log.Warn().Err(rerr).Msg("release lease")
			}
			log.Error().Err(cerr).Msg("commit failed; message handed back")
			r.handBack(ctx, d, log)
		}
		return
	}
	// The publish right after the commit gives up well before the sweep
	// may take the rows (SweepAge), so the two never publish one row both.
	pubCtx, cancelPub := context.WithTimeout(commitCtx, r.cfg.SweepAge/2)
	perr := r.relay.Publish(pubCtx, out)
	cancelPub()
	if perr != nil {
		log.Warn().Err(perr).Msg("publish after commit failed; the outbox sweep will publish; message handed back")
		r.handBack(ctx, d, log)
		return
	}
	r.ack(d, log)
}

// settled reports whether a commit error means the attempt's outcome is
// already decided elsewhere: another worker took the attempt over, or the
// part succeeded before.
func settled(err error) bool {
	return errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrDuplicate)
}

// finish is the statement that ends the claimed attempt with status.
func (r *Runner) finish(claim store.Claim, status, errText string) stmt {
	return stmt{sql: store.FinishStepSQL, args: []any{claim.StepID, r.cfg.Worker, status, wire.Reason(errText)}}
}

// outcome turns the handler's result into the statements that record it.
func (r *Runner) outcome(env *wire.Envelope, route Route, claim store.Claim, msg *Message, herr error, log zerolog.Logger) (string, []stmt) {
	finish := func(status, errText string) stmt { return r.finish(claim, status, errText) }
	switch {
	case herr == nil:
		log.Info().Msg("step succeeded")
		stmts := append([]stmt{finish(store.StatusSucceeded, "")}, msg.stmts...)
		start := task.Start(task.RefOf(env))
		return "succeeded", append(stmts, stmt{sql: start.SQL, args: start.Args, transition: &start})
	case fault.IsParked(herr):
		log.Warn().Err(herr).Msg("step parked for an operator")
		stmts := append([]stmt{finish(store.StatusParked, herr.Error())}, msg.stmts...)
		return "parked", stmts
	}
	class := ErrorClass(herr)
	used := env.Attempt - max(claim.BaseAttempt, 1) + 1
	if class != wire.ClassPermanent && used <= r.cfg.MaxRetries {
		delay := r.cfg.Backoff(used)
		if hint, ok := fault.RetryAfterHint(herr); ok && hint > delay {
			delay = hint
		}
		exchange, actual := r.cfg.Delay(delay)
		retry := env.Retry()
		body, err := json.Marshal(retry)
		if err != nil {
			log.Error().Err(err).Msg("encode retry")
		}
		log.Warn().Err(herr).Str("error_class", class).Dur("retry_in", actual).Msg("step failed; retry scheduled")
		return "retried", []stmt{finish(store.StatusFailed, herr.Error()),
			insert(outbox.New(exchange, wire.RoutingKey(env.Step), body))}
	}
	reason := herr.Error()
	if class != wire.ClassPermanent {
		reason = fmt.Sprintf("%s (retried %d times)", reason, used-1)
	}
	log.Error().Err(herr).Str("error_class", class).Msg("step failed; dead-lettered")
	original, _ := json.Marshal(env)
	fail := task.Fail(task.RefOf(env), msg.Part, env.Step+": "+reason)
	return "dead_lettered", []stmt{finish(store.StatusFailed, herr.Error()),
		{sql: fail.SQL, args: fail.Args, transition: &fail},
		insert(r.deadLetter(uuid.New(), original, env, class, reason, used-1))}
}

// deadLetter builds the seed's dead-letter envelope for the DLQ, published
// under id; retries is how often the step was retried before it gave up.
func (r *Runner) deadLetter(id uuid.UUID, original []byte, env *wire.Envelope, class, reason string, retries int) *outbox.Message {
	dl := wire.NewDeadLetter(original, env, class, reason, time.Now())
	dl.RetryCount = retries
	body, err := dl.Marshal()
	if err != nil {
		// Only an unencodable reason could fail; keep the message anyway.
		body, _ = json.Marshal(map[string]any{"original_message": string(original), "failure_reason": reason,
			"error_class": class, "failed_at": time.Now().UTC()})
	}
	return &outbox.Message{MessageID: id, Exchange: "", RoutingKey: r.cfg.DLQ, Body: body}
}

// reject dead-letters a message that never reached a handler (invalid, or
// waiting too long), then acks it. It touches no step row.
func (r *Runner) reject(ctx context.Context, d Delivery, env *wire.Envelope, class string, err error) {
	log := r.cfg.Log.With().Str("routing_key", d.RoutingKey).Logger()
	if env != nil {
		log = log.With().Str("task_id", env.TaskID.String()).Str("step", env.Step).Int("attempt", env.Attempt).Str("trace_id", env.TraceID).Logger()
	}
	step := "unknown"
	if env != nil {
		step = env.Step
	}
	log.Error().Err(err).Str("error_class", class).Msg("message dead-lettered")
	r.cfg.Metrics.outcome(step, "rejected")
	// Published directly, not through the outbox: its id comes from the
	// delivery, so that a redelivery's dead letter is recorded once.
	o := r.deadLetter(uuid.NewSHA1(deadLetterSpace, d.Body), d.Body, env, class, err.Error(), 0)
	if perr := r.cfg.Publisher.Publish(ctx, o.Exchange, o.RoutingKey, o.Publishing()); perr != nil {
		log.Error().Err(perr).Msg("dead-letter publish failed; message handed back")
		r.handBack(ctx, d, log)
		return
	}
	if env != nil && env.TaskID != uuid.Nil {
		fail := task.Fail(task.RefOf(env), "", fmt.Sprintf("%s: %s", env.Step, err))
		out, ferr := commit(ctx, r.cfg.Pool, nil, []stmt{{sql: fail.SQL, args: fail.Args, transition: &fail}})
		if ferr == nil {
			ferr = r.relay.Publish(ctx, out)
		}
		if ferr != nil {
			log.Warn().Err(ferr).Msg("mark task failed")
		}
	}
	r.ack(d, log)
}

// peek reads the envelope fields of a message that failed validation, for
// the dead letter and to fail its task; nil when not even the task id is a
// UUID.
func peek(body []byte) *wire.Envelope {
	if len(body) > wire.MaxMessageBytes {
		return nil
	}
	var head struct {
		TaskID  string `json:"task_id"`
		Step    string `json:"step"`
		Attempt int    `json:"attempt"`
		TraceID string `json:"trace_id"`
	}
	if json.Unmarshal(body, &head) != nil {
		return nil
	}
	id, err := uuid.Parse(head.TaskID)
	if err != nil {
		return nil
	}
	env := &wire.Envelope{TaskID: id}
	// Keep only what the dead-letter schema accepts.
	if wire.RoutingKey(head.Step) != "" {
		env.Step = head.Step
	}
	if head.Attempt > 0 && head.Attempt <= 1000 {
		env.Attempt = head.Attempt
	}
	if n := len(head.TraceID); n > 0 && n <= 128 && strings.IndexFunc(head.TraceID, func(r rune) bool { return r <= ' ' || r > '~' }) < 0 {
		env.TraceID = head.TraceID
	}
	return env
}

// later republishes the message unchanged through a delay tier, then acks
// it. The republished message carries what the broker's count would
// forget: the hand-backs so far (x-delivery-count restarts at zero) and,
// for a message held by another attempt, since when it has been held.
func (r *Runner) later(ctx context.Context, d Delivery, env *wire.Envelope, wait time.Duration, held bool, log zerolog.Logger) {
	exchange, _ := r.cfg.Delay(wait)
	// The same message: the same id.
	id := env.MessageID
	if id == uuid.Nil {
		id = uuid.NewSHA1(messageSpace, d.Body)
	}
	o := &outbox.Message{MessageID: id, Exchange: exchange, RoutingKey: wire.RoutingKey(env.Step), Body: d.Body}
	msg := o.Publishing()
	msg.Headers = amqp.Table{handBacksHeader: int64(handBacks(d.Headers))}
	if held {
		since, ok := heldSince(d.Headers)
		if !ok {
			since = time.Now()
		}
		msg.Headers[heldSinceHeader] = since.UnixMilli()
	}
	if err := r.cfg.Publisher.Publish(ctx, o.Exchange, o.RoutingKey, msg); err != nil {
		log.Error().Err(err).Msg("delay publish failed; message handed back")
		r.handBack(ctx, d, log)
		return
	}
	r.ack(d, log)
}

// Name spaces of the ids derived from a message body (uuid.NewSHA1): a
// message without an id of its own, and the dead letter of a message.
var (
	messageSpace    = uuid.MustParse("4f1c2b8e-6a59-4c71-9a43-0d7f5a2e9b10")
	deadLetterSpace = uuid.MustParse("b7e3d0a4-2c6f-4e8b-8f15-63a9c1d2e7f4")
)

// Headers the runtime carries across the delay tiers.
const (
	// handBacksHeader counts the hand-backs of a message before its last
	// trip through a delay tier.
	handBacksHeader = "x-dubflow-hand-backs"
	// heldSinceHeader is when (Unix milliseconds) a message was first found
	// held by another attempt.
	heldSinceHeader = "x-dubflow-held-since"
)

// handBacks counts the times a message was handed back: those carried
// across delay tiers plus the broker's x-delivery-count of this trip.
func handBacks(h amqp.Table) int {
	return headerInt(h, handBacksHeader) + headerInt(h, "x-delivery-count")
}

// heldSince returns when a message was first found held, if it was.
func heldSince(h amqp.Table) (time.Time, bool) {
	ms := headerInt(h, heldSinceHeader)
	return time.UnixMilli(int64(ms)), ms > 0
}

func headerInt(h amqp.Table, key string) int {
	switch v := h[key].(type) {
	case int64:
		return int(v)
	case int32:
		return int(v)
	case int16:
		return int(v)
	case int8:
		return int(v)
	case int:
		return v
	case uint8:
		return int(v)
	case uint16:
		return int(v)
	case uint32:
		return int(v)
	}
	return 0
}

func (r *Runner) ack(d Delivery, log zerolog.Logger) {
	r.troubles.Store(0)
	if err := d.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack failed; the broker will redeliver and the duplicate will be skipped")
	}
}

// handBack returns the message to its queue after a pause that grows while
// hand-backs follow each other (1s, 2s, 4s, ... 30s), so that an outage of
// the database neither spins the worker nor exhausts the queue's delivery
// limit within minutes.
func (r *Runner) handBack(ctx context.Context, d Delivery, log zerolog.Logger) {
	n := r.troubles.Add(1)
	pause := min(time.Second<<min(n-1, 5), 30*time.Second)
	select {
	case <-time.After(pause):
	case <-ctx.Done():
	}
	if err := d.Nack(true); err != nil {
		log.Warn().Err(err).Msg("nack failed; the broker will redeliver")
	}
}

// call runs the handler, turning a panic into an error.
func (r *Runner) call(ctx context.Context, h Handler, msg *Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			msg.Log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("handler panicked")
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	return h.Handle(ctx, msg)
}

// What a heartbeat found: the lease held, taken over by another worker
// (leaseLost), or the claim row gone (claimLost).
const (
	leaseHeld int32 = iota
	leaseLost
	claimLost
)

// heartbeat extends the lease while the step runs; when the lease or the
// claim is lost it cancels the step and records which in the returned value.
func (r *Runner) heartbeat(ctx context.Context, cancel context.CancelFunc, stepID int64, log zerolog.Logger) *atomic.Int32 {
	lost := new(atomic.Int32)
	go func() {
		t := time.NewTicker(r.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := store.ExtendLease(ctx, r.cfg.Pool, stepID, r.cfg.Worker, r.cfg.Lease)
				switch {
				case errors.Is(err, store.ErrLeaseLost):
					lost.Store(leaseLost)
					cancel()
					return
				case errors.Is(err, store.ErrClaimLost):
					lost.Store(claimLost)
					cancel()
					return
				}
				if err != nil && ctx.Err() == nil {
					log.Warn().Err(err).Msg("extend lease")
				}
			}
		}
	}()
	return lost
}

// commit runs fns and stmts in one transaction and returns the outbox
// messages it added, with their ids. Without fns the whole transaction is one
// batch: one round trip.
//
// commit is the runtime's boundary to Postgres: every text argument (error
// texts, reasons, what handlers stage) is made clean text (wire.CleanText)
// on its way in, so that no text makes a commit fail.
func commit(ctx context.Context, pool *pgxpool.Pool, fns []func(context.Context, pgx.Tx) error, stmts []stmt) ([]*outbox.Message, error) {
	batch := &pgx.Batch{}
	for _, s := range stmts {
		batch.Queue(s.sql, cleanArgs(s.args)...)
	}
	read := func(br pgx.BatchResults) ([]*outbox.Message, error) {
		var out []*outbox.Message
		for _, s := range stmts {
			if s.transition != nil {
				// A step of a task without a row (a waiting-queue
				// entry's, a test's) changes no task.
				res, err := s.transition.Scan(br.QueryRow())
				if err != nil && !errors.Is(err, task.ErrNotFound) {
					return nil, err
				}
				if res.EventID != 0 {
					out = append(out, s.transition.Event)
				}
				continue
			}
			if s.outbox == nil {
				if _, err := br.Exec(); err != nil {
					return nil, err
				}
				continue
			}
			var id *int64
			if err := br.QueryRow().Scan(&id); err != nil {
				return nil, err
			}
			if id != nil {
				s.outbox.ID = *id
				out = append(out, s.outbox)
			}
		}
		return out, br.Close()
	}
	if len(fns) == 0 {
		// A batch runs in one implicit transaction: all or nothing.
		br := pool.SendBatch(ctx, batch)
		out, err := read(br)
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		return out, nil
	}
	var out []*outbox.Message
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, fn := range fns {
			if err := fn(ctx, tx); err != nil {
				return err
			}
		}
		var err error
		out, err = read(tx.SendBatch(ctx, batch))
		return err
	})
	return out, err
}

// cleanArgs returns args with every text (string, *string, []string) made
// clean text; other values, byte slices among them, are left alone.
func cleanArgs(args []any) []any {
	out := args
	for i, a := range args {
		var c any
		switch v := a.(type) {
		case string:
			if cv := wire.CleanText(v); cv != v {
				c = cv
			}
		case *string:
			if v != nil {
				if cv := wire.CleanText(*v); cv != *v {
					c = &cv
				}
			}
		case []string:
			for j, e := range v {
				if cv := wire.CleanText(e); cv != e {
					cs := append([]string(nil), v...)
					cs[j] = cv
					for k := j + 1; k < len(cs); k++ {
						cs[k] = wire.CleanText(cs[k])
					}
					c = cs
					break
				}
			}
		}
		if c != nil {
			if &out[0] == &args[0] {
				out = append([]any(nil), args...)
			}
			out[i] = c
		}
	}
	return out
}
