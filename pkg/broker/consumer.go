package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ConsumeOptions configures Conn.Consume.
type ConsumeOptions struct {
	// Queue is the queue to consume. Required.
	Queue string
	// Prefetch is the channel's Qos prefetch count: how many unacknowledged
	// deliveries the broker sends ahead. Zero means Concurrency.
	Prefetch int
	// Concurrency is how many handlers run at once. Zero means 1.
	Concurrency int
	// Tag is the consumer tag; empty means the connection name plus a
	// random suffix.
	Tag string
	// Grace is how long handlers still running after ctx is cancelled keep
	// their context; after that it is cancelled too. Zero means never: a
	// handler's context is only cancelled when it returns.
	Grace time.Duration
	// Unstarted, when set, is told of each delivery handed back unstarted
	// because the consumer stopped (its context ended: a shutdown, a
	// pause), just before it is requeued; it must not settle it.
	Unstarted func(d amqp.Delivery)
}

// Delivery is one message received by Consume. Settle it exactly once with
// Ack, Nack or Reject. An unsettled delivery is requeued when its handler
// returns.
type Delivery struct {
	amqp.Delivery
	settled atomic.Bool
}

// Ack acknowledges the delivery. An ack on a channel that has died returns
// an error; the broker will redeliver the message.
func (d *Delivery) Ack() error {
	d.settled.Store(true)
	if err := d.Delivery.Ack(false); err != nil {
		return fmt.Errorf("ack delivery %d: %w", d.DeliveryTag, err)
	}
	return nil
}

// Nack negatively acknowledges the delivery: requeued, or dead-lettered to
// DLQ when requeue is false.
func (d *Delivery) Nack(requeue bool) error {
	d.settled.Store(true)
	if err := d.Delivery.Nack(false, requeue); err != nil {
		return fmt.Errorf("nack delivery %d: %w", d.DeliveryTag, err)
	}
	return nil
}

// Reject rejects the delivery: requeued, or dead-lettered to DLQ when
// requeue is false.
func (d *Delivery) Reject(requeue bool) error {
	d.settled.Store(true)
	if err := d.Delivery.Reject(requeue); err != nil {
		return fmt.Errorf("reject delivery %d: %w", d.DeliveryTag, err)
	}
	return nil
}

// Settled reports whether Ack, Nack or Reject has been called.
func (d *Delivery) Settled() bool { return d.settled.Load() }

// Consume consumes opts.Queue with manual acknowledgements, running up to
// opts.Concurrency handlers at once, until ctx is cancelled. After a lost
// connection or channel it subscribes again on the recovered connection;
// deliveries of a dead channel are redelivered by the broker, so handlers
// must tolerate duplicates. When ctx is cancelled it cancels the consumer
// first, hands back deliveries not yet started, waits for running handlers
// and returns nil. It returns ErrClosed if the Conn is closed.
//
// A handler that panics is logged and its delivery requeued; the queue's
// delivery limit dead-letters a message that keeps failing.
func (c *Conn) Consume(ctx context.Context, opts ConsumeOptions, handle func(context.Context, *Delivery)) error {
	if opts.Queue == "" {
		return errors.New("consume: no queue")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	if opts.Prefetch <= 0 {
		opts.Prefetch = opts.Concurrency
	}
	if opts.Tag == "" {
		opts.Tag = c.name + "." + uuid.NewString()[:8]
	}
	c.running.Add(1)
	defer c.running.Add(-1)

	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if opts.Grace > 0 {
		stop := context.AfterFunc(ctx, func() { time.AfterFunc(opts.Grace, cancel) })
		defer stop()
	}
	cs := &consumer{
		conn:   c,
		opts:   opts,
		handle: handle,
		hctx:   hctx,
		slots:  make(chan struct{}, opts.Concurrency),
		idle:   make(chan dispatchJob),
		stop:   make(chan struct{}),
	}
	defer cs.all.Wait()
	defer close(cs.stop)

	log := c.log.With().Str("queue", opts.Queue).Str("consumer_tag", opts.Tag).Logger()
	for attempt := 1; ; {
		subscribed, err := cs.run(ctx)
		switch {
		case ctx.Err() != nil:
			log.Info().Msg("consumer stopped")
			return nil
		case errors.Is(err, ErrClosed) || c.isClosing():
			return ErrClosed
		}
		if subscribed {
			attempt = 1
			log.Warn().Err(err).Msg("consumer lost, resubscribing")
			continue
		}
		log.Warn().Err(err).Int("attempt", attempt).Msg("subscribe failed")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.backoff(attempt)):
		}
		attempt++
	}
}

// consumer is the state of one Consume call across subscriptions.
type consumer struct {
	conn   *Conn
	opts   ConsumeOptions
	handle func(context.Context, *Delivery)
	hctx   context.Context
	slots  chan struct{}  // one per running handler
	all    sync.WaitGroup // every handler of every subscription
	// idle hands a delivery to a handler goroutine waiting for one; stop
	// ends the waiting ones when Consume returns (see dispatcher).
	idle chan dispatchJob
	stop chan struct{}
}

// dispatchJob is one delivery for a handler goroutine.
type dispatchJob struct {
	d        *Delivery
	inflight *sync.WaitGroup
}

// dispatcherIdle is how long a handler goroutine waits for the next
// delivery before it ends.
const dispatcherIdle = 5 * time.Second

// subscription is one channel consuming the queue.
type subscription struct {
	ch         *amqp.Channel
	closes     chan *amqp.Error
	cancels    chan string
	deliveries <-chan amqp.Delivery
	// inflight are this subscription's handlers: the channel is closed only
	// after they have settled their deliveries on it.
	inflight sync.WaitGroup
}

// release closes the channel once the subscription's handlers are done.
func (s *subscription) release() {
	go func() {
		s.inflight.Wait()
		_ = s.ch.Close()
	}()
}

// subscribe opens a channel and starts consuming the queue on it.
func (cs *consumer) subscribe(ctx context.Context) (*subscription, error) {
	opts := cs.opts
	ch, _, err := cs.conn.channel(ctx)
	if err != nil {
		return nil, err
	}
	s := &subscription{ch: ch, closes: ch.NotifyClose(make(chan *amqp.Error, 1)),
		cancels: ch.NotifyCancel(make(chan string, 1))}
	if err := ch.Qos(opts.Prefetch, 0, false); err != nil {
		s.release()
		return nil, fmt.Errorf("set prefetch on %s: %w", opts.Queue, err)
	}
	if s.deliveries, err = ch.Consume(opts.Queue, opts.Tag, false, false, false, false, nil); err != nil {
		s.release()
		return nil, fmt.Errorf("consume %s: %w", opts.Queue, err)
	}
	return s, nil
}

// run subscribes once and dispatches deliveries until the subscription
// ends. subscribed reports whether the consumer got as far as receiving.
func (cs *consumer) run(ctx context.Context) (subscribed bool, err error) {
	c, opts := cs.conn, cs.opts
	s, err := cs.subscribe(ctx)
	if err != nil {
		return false, err
	}
	c.subscribed.Add(1)
	c.opts.metrics.subscribed(c.name, opts.Queue)
	c.log.Info().Str("queue", opts.Queue).Str("consumer_tag", opts.Tag).Int("prefetch", opts.Prefetch).
		Int("concurrency", opts.Concurrency).Msg("consuming")
	unsubscribe := sync.OnceFunc(func() { c.subscribed.Add(-1) })
	defer unsubscribe()

	for {
		select {
		case <-ctx.Done():
			unsubscribe()
			cs.shutdown(s.ch, s.deliveries, &s.inflight)
			return true, ctx.Err()
		case e := <-s.closes:
			s.release()
			return true, fmt.Errorf("channel closed: %w", closeReason(e))
		case tag := <-s.cancels:
			s.release()
			return true, fmt.Errorf("consumer %s cancelled by the broker", tag)
		case d, ok := <-s.deliveries:
			if !ok {
				s.release()
				return true, fmt.Errorf("deliveries of %s ended: %w", opts.Queue, amqp.ErrClosed)
			}
			if !cs.acquire(ctx) {
				cs.unstarted(d)
				unsubscribe()
				cs.shutdown(s.ch, s.deliveries, &s.inflight)
				return true, ctx.Err()
			}
			if s.ch.IsClosed() {
				// The broker will redeliver it; an ack could not reach it.
				<-cs.slots
				continue
			}
			s.inflight.Add(1)
			cs.all.Add(1)
			job := dispatchJob{d: &Delivery{Delivery: d}, inflight: &s.inflight}
			select {
			case cs.idle <- job:
			default:
				go cs.dispatcher(job)
			}
		}
	}
}

// acquire waits for a free handler slot and takes it. It reports false,
// holding no slot, when shutdown began while it waited: a select with both
// cases ready picks either, so a slot freed by a handler that just finished
// must not start a delivery once ctx is cancelled.
func (cs *consumer) acquire(ctx context.Context) bool {
	select {
	case cs.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if ctx.Err() != nil {
		<-cs.slots
		return false
	}
	return true
}

// dispatcher runs job, then the next deliveries handed to it while it
// waits (idle), until none came for dispatcherIdle or Consume returned. A
// goroutine kept busy keeps the stack its handler grew, instead of each
// delivery growing a fresh one again (decoding and claiming a message goes
// deep). A delivery finds no waiting goroutine only while all are busy or
// between two deliveries, so there are at most twice as many as handler
// slots.
func (cs *consumer) dispatcher(job dispatchJob) {
	t := time.NewTimer(dispatcherIdle)
	defer t.Stop()
	for {
		cs.dispatch(job.d, job.inflight)
		t.Reset(dispatcherIdle)
		select {
		case job = <-cs.idle:
		case <-t.C:
			return
		case <-cs.stop:
			return
		}
	}
}

// dispatch runs the handler for one delivery and frees its slot.
func (cs *consumer) dispatch(d *Delivery, inflight *sync.WaitGroup) {
	defer cs.all.Done()
	defer inflight.Done()
	defer func() { <-cs.slots }()
	defer func() {
		v := recover()
		if v == nil && d.Settled() {
			return
		}
		log := cs.conn.log.With().Str("queue", cs.opts.Queue).Uint64("delivery_tag", d.DeliveryTag).Logger()
		if v != nil {
			log.Error().Interface("panic", v).Msg("handler panicked, requeueing")
		}
		if !d.Settled() {
			if err := d.Nack(true); err != nil {
				log.Warn().Err(err).Msg("requeue unsettled delivery")
			}
		}
	}()
	cs.handle(cs.hctx, d)
}

// unstarted hands back a delivery the consumer will not start, telling
// opts.Unstarted first.
func (cs *consumer) unstarted(d amqp.Delivery) {
	if cs.opts.Unstarted != nil {
		cs.opts.Unstarted(d)
	}
	_ = d.Nack(false, true)
}

// shutdown is the graceful end of a subscription: cancel the consumer so
// no new deliveries come, hand back the ones already received but not
// started, wait for running handlers to settle theirs, close the channel.
func (cs *consumer) shutdown(ch *amqp.Channel, deliveries <-chan amqp.Delivery, inflight *sync.WaitGroup) {
	if err := ch.Cancel(cs.opts.Tag, false); err != nil {
		cs.conn.log.Warn().Err(err).Str("queue", cs.opts.Queue).Msg("cancel consumer")
	}
	// Cancel closes deliveries after the ones already buffered; a dead
	// channel closes them at once.
	for d := range deliveries {
		cs.unstarted(d)
	}
	inflight.Wait()
	if err := ch.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		cs.conn.log.Warn().Err(err).Str("queue", cs.opts.Queue).Msg("close consumer channel")
	}
}

func closeReason(e *amqp.Error) error {
	if e == nil {
		return amqp.ErrClosed
	}
	return e
}
