package step

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// delivery is one message on its way through the runner: what was read from
// it, the claimed attempt, and the facts its decisions are taken from.
type delivery struct {
	env    *wire.Envelope // nil when not even the task id is readable
	route  Route
	msg    *Message
	stepID int64
	// watch fires when the task's work stops (nil until the claim).
	watch *task.Watch
	log   zerolog.Logger
	facts facts
}

// step names the delivery's step for metrics.
func (dl *delivery) step() string {
	if dl.env == nil {
		return "unknown"
	}
	return dl.env.Step
}

// read decodes the delivery, finds its route and part and claims its
// attempt: the facts of the first decision.
func (r *Runner) read(ctx context.Context, d Delivery) *delivery {
	dl := &delivery{facts: facts{HandBacks: handBacks(d.Headers)}}
	if since, ok := heldSince(d.Headers); ok {
		dl.facts.HeldSince = since
	}
	env, err := wire.Decode(d.Body)
	if err != nil {
		// What can be read of it still names the task to fail, if any.
		dl.env, dl.facts.Invalid = peek(d.Body), fmt.Errorf("invalid message: %w", err)
		dl.log = r.logger(d, dl.env)
		return dl
	}
	dl.env, dl.log = env, r.logger(d, env)
	route, ok := r.routes[env.Step]
	if !ok {
		dl.facts.Invalid = fmt.Errorf("invalid message: step %q is not served on queue %s", env.Step, r.cfg.Queue)
		return dl
	}
	if err := admit(d.RoutingKey, env, route); err != nil {
		dl.facts.Invalid = fmt.Errorf("invalid message: %w", err)
		return dl
	}
	part, err := PartOf(env)
	if err != nil {
		dl.facts.Invalid = fmt.Errorf("invalid message: %w", err)
		return dl
	}
	dl.route, dl.msg = route, &Message{Envelope: env, Part: part, Log: dl.log, Timeout: route.Timeout}
	f := &dl.facts
	// A part may wait for another step than the route's (wire.Depender:
	// a tts part waits for nothing: its translate batch emitted it).
	after := route.After
	if after != "" {
		after = env.After(after)
	}
	f.Step, f.After, f.Timeout, f.Attempt, f.CreatedAt = env.Step, after, route.Timeout, env.Attempt, env.CreatedAt
	key := attempt.Key{TaskID: env.TaskID, Step: env.Step, Part: part, Attempt: env.Attempt}
	// Watched before the claim reads the task's status, so that a cancel
	// committed after that read still stops the run.
	dl.watch = r.cfg.Watch.Watch(env.TaskID)
	var claim attempt.Lease
	ready := ReadyAt(d.Headers, env)
	err = r.claims.do(ctx, env.TaskID.String()+"/"+env.Step+"/"+part, func(b *pgx.Batch) {
		attempt.QueueClaim(b, key, r.cfg.Worker, r.cfg.Lease, after, d.Body, ready, &claim)
	})
	if err != nil {
		f.Claim, f.ClaimErr = claimFailed, err
		return dl
	}
	if claim.QueueWait != nil {
		r.cfg.Metrics.waited(env.Step, claim.Project, *claim.QueueWait)
	}
	dl.stepID = claim.StepID
	f.Claim, f.HeldUntil, f.BaseAttempt = claimResultOf(claim.Outcome), claim.HeldUntil, claim.BaseAttempt
	return dl
}

// admit refuses a message whose routing key names another step than its
// envelope (a waiting.cancel carrying a waiting_enqueue would otherwise run
// as an enqueue), then runs the route's own Admit. A routing key that names
// no step (a queue's name, through the default exchange) is not compared.
func admit(routingKey string, env *wire.Envelope, route Route) error {
	for _, s := range wire.Steps() {
		if routingKey == wire.RoutingKey(s) && s != env.Step {
			return fmt.Errorf("routing key %s is for step %s, the envelope's step is %s", routingKey, s, env.Step)
		}
	}
	if route.Admit != nil {
		return route.Admit(env)
	}
	return nil
}

// claimResultOf names a claim outcome for the decisions.
func claimResultOf(outcome string) claimResult {
	switch outcome {
	case attempt.Claimed:
		return claimClaimed
	case attempt.Done:
		return claimDone
	case attempt.Finished:
		return claimFinished
	case attempt.Waiting:
		return claimWaiting
	case attempt.Held:
		return claimHeld
	case attempt.Ended:
		return claimEnded
	}
	return claimUnknown
}

// logger is the log of one delivery: its routing key and what its envelope
// names.
func (r *Runner) logger(d Delivery, env *wire.Envelope) zerolog.Logger {
	c := r.cfg.Log.With().Str("routing_key", d.RoutingKey)
	if env != nil {
		c = c.Str("task_id", env.TaskID.String()).Str("step", env.Step).Int("attempt", env.Attempt).Str("trace_id", env.TraceID)
	}
	return c.Logger()
}

// reject dead-letters a message that never reached a handler (invalid, or
// waiting too long), fails its task if it names one, then acks it. It
// touches no step row. The dead letter names the queue the message was
// consumed from and, when the message names no step served there, the
// queue's step.
func (r *Runner) reject(ctx context.Context, d Delivery, env *wire.Envelope, class string, err error, log zerolog.Logger) {
	// Published directly, not through the outbox: its id comes from the
	// delivery, so that a redelivery's dead letter is recorded once.
	served := r.served(env)
	o := r.deadLetter(rejectedID(r.cfg.Queue, d), d.Body, served, class, err.Error(), 0)
	if perr := r.cfg.Publisher.Publish(ctx, o.Exchange, o.RoutingKey, o.Publishing()); perr != nil {
		log.Error().Err(perr).Msg("dead-letter publish failed; message handed back")
		r.settle.HandBack(ctx, d, log)
		return
	}
	if env != nil && env.TaskID != uuid.Nil {
		fail := task.Fail(task.RefOf(env), "", fmt.Sprintf("%s: %s", served.Step, err))
		begun := time.Now()
		out, ferr := commit(ctx, r.cfg.Pool, nil, []stmt{{sql: fail.SQL, args: fail.Args, transition: &fail}})
		if ferr == nil {
			ferr = r.publishCommitted(ctx, begun, out)
		}
		if ferr != nil {
			log.Warn().Err(ferr).Msg("mark task failed")
		}
	}
	r.settle.Ack(d, log)
}

// rejectedID is the dead-letter id of a delivery rejected before its
// handler: derived from the queue it was consumed from and the publisher's
// message id, or its body when it has none. A redelivery of the message is
// recorded once; the same bytes on two queues are recorded apart.
func rejectedID(queue string, d Delivery) uuid.UUID {
	if d.MessageID != "" {
		return uuid.NewSHA1(deadLetterSpace, []byte(queue+"\x00message_id\x00"+d.MessageID))
	}
	return uuid.NewSHA1(deadLetterSpace, append([]byte(queue+"\x00body\x00"), d.Body...))
}

// served returns what the dead letter of a rejected message says about
// it: env's task, attempt and trace (nothing when env is nil), and its step
// when this runner serves it, else the step of the consumed queue.
func (r *Runner) served(env *wire.Envelope) *wire.Envelope {
	var out wire.Envelope
	if env != nil {
		out = *env
	}
	if _, ok := r.routes[out.Step]; !ok {
		out.Step = r.queueStep()
	}
	return &out
}

// queueStep is the step of the consumed queue: the work queue's step, or
// the one route's; "" for a queue of several steps.
func (r *Runner) queueStep() string {
	if s := wire.StepOfQueue(r.cfg.Queue); s != "" {
		return s
	}
	if len(r.cfg.Routes) == 1 {
		return r.cfg.Routes[0].Step
	}
	return ""
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
	msg.Headers[handBacksHeader] = int64(handBacks(d.Headers))
	if held {
		since, ok := heldSince(d.Headers)
		if !ok {
			since = time.Now()
		}
		msg.Headers[heldSinceHeader] = since.UnixMilli()
	}
	if err := r.cfg.Publisher.Publish(ctx, o.Exchange, o.RoutingKey, msg); err != nil {
		log.Error().Err(err).Msg("delay publish failed; message handed back")
		r.settle.HandBack(ctx, d, log)
		return
	}
	r.settle.Ack(d, log)
}

// release frees the delivery's attempt for the next delivery of the message.
func (r *Runner) release(ctx context.Context, dl *delivery) {
	if err := attempt.Release(context.WithoutCancel(ctx), r.cfg.Pool, dl.stepID, r.cfg.Worker); err != nil {
		dl.log.Warn().Err(err).Msg("release lease")
	}
}

// handBackRecordTimeout bounds the recording of a hand-back: the database
// may be the reason of the hand-back, which must not wait for it.
const handBackRecordTimeout = 2 * time.Second

// recordHandBack records durably (attempt.HandBack) that the delivery's
// message goes back without an outcome, and why (dec.Back), for the task's
// timeline. A message nothing could be read of is not recorded; a failure
// to record is logged and changes nothing else.
func (r *Runner) recordHandBack(ctx context.Context, dl *delivery, dec decision) {
	if dl.msg == nil || dec.Back == "" {
		return
	}
	var detail string
	if dec.Err != nil {
		detail = dec.Err.Error()
	}
	k := attempt.Key{TaskID: dl.env.TaskID, Step: dl.env.Step, Part: dl.msg.Part, Attempt: dl.env.Attempt}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackRecordTimeout)
	defer cancel()
	if err := attempt.HandBack(k, r.cfg.Worker, dec.Back, detail).Exec(rctx, r.cfg.Pool); err != nil {
		dl.log.Warn().Err(err).Str("reason", dec.Back).Msg("record hand-back")
	}
}

// recordUnstarted records the hand-back of a delivery its source hands
// back unstarted (backStopped), when its envelope names a part.
func (r *Runner) recordUnstarted(ctx context.Context, d Delivery) {
	env, err := wire.Decode(d.Body)
	if err != nil {
		return
	}
	part, err := PartOf(env)
	if err != nil {
		return
	}
	dl := &delivery{env: env, msg: &Message{Envelope: env, Part: part}, log: r.logger(d, env)}
	r.recordHandBack(ctx, dl, decision{Back: backStopped,
		Err: errors.New("the consumer stopped (a shutdown, or the step paused) before the delivery started")})
}

// peek reads the envelope fields of a message that failed validation
// (wire.PeekHead), for the dead letter and to fail its task; nil when not
// even the task id is a UUID.
func peek(body []byte) *wire.Envelope {
	h, ok := wire.PeekHead(body)
	if !ok || h.TaskID == uuid.Nil {
		return nil
	}
	return &wire.Envelope{TaskID: h.TaskID, Step: h.Step, Attempt: h.Attempt, TraceID: h.TraceID}
}
