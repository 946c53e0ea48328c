package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Publish outcomes callers can branch on with errors.Is.
var (
	// ErrUnroutable means the broker returned a mandatory message because
	// no queue is bound for its routing key.
	ErrUnroutable = errors.New("broker: message unroutable")
	// ErrNacked means the broker refused responsibility for the message,
	// again and again for as long as the publish could wait (for example a
	// queue at its length limit with reject-publish overflow). A single
	// nack, such as a quorum queue's while its leader is re-elected, is
	// retried and never returned.
	ErrNacked = errors.New("broker: message nacked")
	// ErrUnconfirmed means the broker kept the channel open but never
	// confirmed the message, however often it was published again.
	ErrUnconfirmed = errors.New("broker: message never confirmed")
)

// PublishIDHeader is the header Publisher adds to every message to match a
// basic.return to its publish. Consumers may ignore it. A message published
// again (after a nack, a lost confirm or a lost channel) keeps its id, as it
// keeps its MessageId.
const PublishIDHeader = "dubflow-publish-id"

// ContentTypeJSON is the default content type of published messages.
const ContentTypeJSON = "application/json"

// Default publisher settings.
const (
	// DefaultConfirmTimeout is how long a publish waits for its confirm on
	// an open channel before it publishes the message again.
	DefaultConfirmTimeout = 15 * time.Second
	// DefaultRefusalPatience is how long a publish keeps publishing a
	// message the broker nacks (or never confirms) before it gives up with
	// ErrNacked (or ErrUnconfirmed). A quorum queue elects a new leader
	// within seconds of losing a node; a queue at its length limit stays
	// full for longer.
	DefaultRefusalPatience = 30 * time.Second
)

// Publisher publishes with publisher confirms over one channel of a Conn,
// reopened after a loss. Many publishes may be in flight at once; each
// waits for its own confirm. A Publisher is safe for concurrent use.
type Publisher struct {
	conn     *Conn
	confirm  time.Duration
	patience time.Duration
	seq      atomic.Uint64
	cur      atomic.Pointer[pubChannel]
	lock     chan struct{} // one slot: serializes opening a channel
	closed   atomic.Bool
}

// PublisherOption configures NewPublisher.
type PublisherOption func(*Publisher)

// WithConfirmTimeout sets how long a publish waits for its confirm on an
// open channel before publishing the message again (DefaultConfirmTimeout).
func WithConfirmTimeout(d time.Duration) PublisherOption {
	return func(p *Publisher) { p.confirm = d }
}

// WithRefusalPatience sets how long a publish goes on publishing a message
// the broker nacks or does not confirm before it fails
// (DefaultRefusalPatience); the caller's context may end it sooner.
func WithRefusalPatience(d time.Duration) PublisherOption {
	return func(p *Publisher) { p.patience = d }
}

// NewPublisher returns a Publisher on conn. The channel is opened by the
// first Publish.
func NewPublisher(conn *Conn, opts ...PublisherOption) *Publisher {
	p := &Publisher{conn: conn, confirm: DefaultConfirmTimeout, patience: DefaultRefusalPatience, lock: make(chan struct{}, 1)}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// Publish sends msg to exchange with routing key key, mandatory (except
// events, whose routing key starts with EventPrefix: an event no integrator
// has bound a queue for is dropped by the broker, as pub/sub events are,
// rather than failing its publisher forever), and waits
// for the broker's confirm. Unless set, DeliveryMode is persistent and
// ContentType application/json. It returns nil only once the broker has
// confirmed the message; an unroutable message is ErrUnroutable.
//
// Publish publishes the message again, unchanged (the same MessageId and
// PublishIDHeader), when the connection or channel is lost before the
// confirm (on the recovered connection), when the broker nacks it (as a
// quorum queue does while it elects a new leader) and when no confirm
// arrives within the confirm timeout although the channel stays open, with
// pauses growing from 50 ms to 2 s, until ctx is done. A nack or missing
// confirm that persists for the refusal patience (or until ctx is done) is
// returned as ErrNacked or ErrUnconfirmed, with how often and for how long
// the broker refused and the likely cause. A message may therefore arrive
// more than once (at-least-once): consumers deduplicate by message id.
func (p *Publisher) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	if msg.DeliveryMode == 0 {
		msg.DeliveryMode = amqp.Persistent
	}
	if msg.ContentType == "" {
		msg.ContentType = ContentTypeJSON
	}
	if err := msg.Headers.Validate(); err != nil {
		return fmt.Errorf("publish to %s with key %s: %w", exchange, key, err)
	}
	id := strconv.FormatUint(p.seq.Add(1), 36)
	headers := make(amqp.Table, len(msg.Headers)+1)
	for k, v := range msg.Headers {
		headers[k] = v
	}
	headers[PublishIDHeader] = id
	msg.Headers = headers

	var r refusals
	for attempt := 1; ; attempt++ {
		err := p.publishOnce(ctx, exchange, key, id, msg)
		var lost *lostError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &lost):
			r.last = nil
			p.conn.opts.metrics.published(p.conn.name, "lost")
			p.conn.opts.metrics.retried(p.conn.name, "lost")
			p.conn.log.Debug().Err(lost.cause).Int("attempt", attempt).Str("exchange", exchange).Str("key", key).
				Msg("publish lost with its channel, retrying")
		case errors.Is(err, ErrNacked), errors.Is(err, ErrUnconfirmed):
			r.add(err)
			if r.span() >= p.patience {
				return fmt.Errorf("publish to %s with key %s: %w", exchange, key, r.final(p.confirm))
			}
			reason := "nack"
			if errors.Is(err, ErrUnconfirmed) {
				reason = "unconfirmed"
			}
			p.conn.opts.metrics.retried(p.conn.name, reason)
			p.conn.log.Debug().Err(err).Int("attempt", attempt).Str("exchange", exchange).Str("key", key).
				Msg("publish refused, retrying")
		case ctx.Err() != nil && r.last != nil:
			return fmt.Errorf("publish to %s with key %s: %w", exchange, key, r.final(p.confirm))
		default:
			return fmt.Errorf("publish to %s with key %s: %w", exchange, key, err)
		}
		select {
		case <-ctx.Done():
			if r.last != nil {
				// The broker's refusal, not the caller's deadline, is why
				// the message is not on its queue.
				return fmt.Errorf("publish to %s with key %s: %w", exchange, key, r.final(p.confirm))
			}
			return fmt.Errorf("publish to %s with key %s: %w", exchange, key, errors.Join(ctx.Err(), lost.cause))
		case <-time.After(retryPause(attempt)):
		}
	}
}

// retryPause is the pause before publishing again after the attempt-th
// try: 50 ms, doubling, at most 2 s.
func retryPause(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt-1, 6), 2*time.Second)
}

// refusals counts the nacks and missing confirms of one publish since the
// last time the broker answered otherwise (a lost channel starts afresh).
type refusals struct {
	nacks, unconfirmed int
	first              time.Time
	last               error // the latest refusal; nil after a loss
}

func (r *refusals) add(err error) {
	if r.last == nil {
		r.nacks, r.unconfirmed, r.first = 0, 0, time.Now()
	}
	if errors.Is(err, ErrNacked) {
		r.nacks++
	} else {
		r.unconfirmed++
	}
	r.last = err
}

func (r *refusals) span() time.Duration { return time.Since(r.first) }

// final is the error of a publish the broker went on refusing: ErrNacked
// when it nacked at all, else ErrUnconfirmed, with the counts, the span
// and the likely cause.
func (r *refusals) final(confirmTimeout time.Duration) error {
	span := r.span().Round(time.Millisecond)
	if r.nacks > 0 {
		also := ""
		if r.unconfirmed > 0 {
			also = fmt.Sprintf(" (and unconfirmed within %s %d times)", confirmTimeout, r.unconfirmed)
		}
		return fmt.Errorf("%w %d times%s over %s; likely a queue at its length limit "+
			"with x-overflow reject-publish, or a quorum queue without a leader (a majority of its nodes down)",
			ErrNacked, r.nacks, also, span)
	}
	return fmt.Errorf("%w: no confirm within %s, %d times over %s; likely a quorum queue without a leader "+
		"(a majority of its nodes down) or an overloaded broker", ErrUnconfirmed, confirmTimeout, r.unconfirmed, span)
}

// Close closes the publisher's channel. Publishes after Close fail with
// ErrClosed; call it once in-flight publishes have returned.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	p.lock <- struct{}{}
	defer func() { <-p.lock }()
	if pc := p.cur.Swap(nil); pc != nil {
		if err := pc.ch.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			return fmt.Errorf("close publisher channel: %w", err)
		}
	}
	return nil
}

func (p *Publisher) publishOnce(ctx context.Context, exchange, key, id string, msg amqp.Publishing) error {
	pc, err := p.channel(ctx)
	if err != nil {
		return err
	}
	mandatory := !strings.HasPrefix(key, wire.EventPrefix)
	dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return pc.lost(err)
	}
	if err := p.awaitConfirm(ctx, pc, dc); err != nil {
		if ctx.Err() != nil && !pc.ch.IsClosed() {
			return &ConfirmPendingError{err: err, await: func(ctx context.Context) error {
				select {
				case <-dc.Done():
				case <-ctx.Done():
					return fmt.Errorf("wait for confirm: %w", ctx.Err())
				}
				if !dc.Acked() {
					return p.nacked(pc)
				}
				return p.checkReturned(pc, id)
			}}
		}
		return err
	}
	if !dc.Acked() {
		return p.nacked(pc)
	}
	pc.nacks.Store(0)
	return p.checkReturned(pc, id)
}

// ConfirmPendingError is Publish's error when the caller's context ended
// after the broker took the message but before it confirmed it: the
// message may still be confirmed, and so be on its queue. Await tells.
type ConfirmPendingError struct {
	err   error
	await func(context.Context) error
}

func (e *ConfirmPendingError) Error() string { return e.err.Error() }
func (e *ConfirmPendingError) Unwrap() error { return e.err }

// Await waits, until ctx ends, for the confirm the publish stopped waiting
// for: nil once the broker has confirmed the message and not returned it
// (it is on its queue), ErrNacked, ErrUnroutable or ctx's error otherwise.
// A caller that keeps the message to publish again later (an outbox row)
// can drop it on nil instead of sending a copy.
func (e *ConfirmPendingError) Await(ctx context.Context) error { return e.await(ctx) }

// awaitConfirm waits for the broker's confirm of dc, at most p.confirm.
func (p *Publisher) awaitConfirm(ctx context.Context, pc *pubChannel, dc *amqp.DeferredConfirmation) error {
	timeout := time.NewTimer(p.confirm)
	defer timeout.Stop()
	select {
	case <-dc.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for confirm: %w", ctx.Err())
	case <-timeout.C:
		if pc.ch.IsClosed() {
			return pc.lost(amqp.ErrClosed)
		}
		// The channel is open, so the confirm may still come; the message
		// is published again all the same (a duplicate at worst).
		p.conn.opts.metrics.published(p.conn.name, "unconfirmed")
		return ErrUnconfirmed
	}
}

// nacked is the error of a publish the broker nacked on pc; after
// nacksBeforeNewChannel nacks in a row pc is closed for a new one.
func (p *Publisher) nacked(pc *pubChannel) error {
	if pc.ch.IsClosed() {
		// Closing a channel nacks every outstanding confirm.
		return pc.lost(amqp.ErrClosed)
	}
	p.conn.opts.metrics.published(p.conn.name, "nack")
	if pc.nacks.Add(1) >= nacksBeforeNewChannel {
		// A channel keeps its own view of each quorum queue (which
		// member leads it, whether it takes publishes); after a leader
		// change that view can go on refusing while a new channel's
		// would not. Publishes in flight on it see a lost channel and
		// are published again.
		p.conn.log.Info().Int("nacks", int(pc.nacks.Load())).Msg("publisher channel keeps nacking; opening a new one")
		_ = pc.ch.Close()
	}
	return ErrNacked
}

// checkReturned reports ErrUnroutable when the broker returned the acked
// message id (no queue was bound to its key).
func (p *Publisher) checkReturned(pc *pubChannel, id string) error {
	// A basic.return precedes the basic.ack of the same message, and the
	// library hands it to pc's drainer before it processes the ack; once the
	// drainer has answered a sync request it has recorded that return.
	select {
	case pc.sync <- struct{}{}:
	case <-pc.drained:
	}
	pc.mu.Lock()
	ret, returned := pc.returned[id]
	delete(pc.returned, id)
	pc.mu.Unlock()
	if returned {
		p.conn.opts.metrics.published(p.conn.name, "returned")
		return fmt.Errorf("%w: %d %s", ErrUnroutable, ret.ReplyCode, ret.ReplyText)
	}
	p.conn.opts.metrics.published(p.conn.name, "ack")
	return nil
}

// channel returns the open confirm-mode channel, opening one if needed.
func (p *Publisher) channel(ctx context.Context) (*pubChannel, error) {
	if pc := p.cur.Load(); pc != nil && !pc.ch.IsClosed() {
		return pc, nil
	}
	select {
	case p.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.lock }()
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if pc := p.cur.Load(); pc != nil && !pc.ch.IsClosed() {
		return pc, nil
	}
	ch, _, err := p.conn.channel(ctx)
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, &lostError{cause: fmt.Errorf("enable confirms: %w", err)}
	}
	pc := newPubChannel(ch)
	p.cur.Store(pc)
	return pc, nil
}

// nacksBeforeNewChannel is how many nacks in a row make the publisher
// replace its channel.
const nacksBeforeNewChannel = 3

// lostError marks a publish whose channel died before the confirm; Publish
// retries it.
type lostError struct{ cause error }

func (e *lostError) Error() string { return "channel lost: " + e.cause.Error() }
func (e *lostError) Unwrap() error { return e.cause }

// pubChannel is one confirm-mode channel and the goroutines draining its
// return and close notifications.
type pubChannel struct {
	ch      *amqp.Channel
	sync    chan struct{} // unbuffered: a receive means earlier returns are recorded
	drained chan struct{} // closed when the return drainer has exited
	dead    chan struct{} // closed when the channel has closed and closeErr is final
	nacks   atomic.Int32  // nacks since the last ack

	mu       sync.Mutex
	returned map[string]amqp.Return
	closeErr *amqp.Error
}

func newPubChannel(ch *amqp.Channel) *pubChannel {
	pc := &pubChannel{
		ch:       ch,
		sync:     make(chan struct{}),
		drained:  make(chan struct{}),
		dead:     make(chan struct{}),
		returned: make(map[string]amqp.Return),
	}
	// Unbuffered, so the library's send completes only when the drainer has
	// taken the return, before the reader goes on to the ack.
	returns := ch.NotifyReturn(make(chan amqp.Return))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		defer close(pc.drained)
		for {
			select {
			case r, ok := <-returns:
				if !ok {
					return
				}
				if id, ok := r.Headers[PublishIDHeader].(string); ok {
					pc.mu.Lock()
					pc.returned[id] = r
					pc.mu.Unlock()
				}
			case <-pc.sync:
			}
		}
	}()
	go func() {
		defer close(pc.dead)
		for e := range closes {
			pc.mu.Lock()
			pc.closeErr = e
			pc.mu.Unlock()
		}
	}()
	return pc
}

// lost closes the channel (a no-op if the broker already did), waits until
// it is gone and classifies the loss: a channel closed by the broker for a
// reason that would repeat (no such exchange, access refused, precondition
// failed) is final; anything else is a lostError to retry.
func (pc *pubChannel) lost(cause error) error {
	_ = pc.ch.Close()
	<-pc.dead
	pc.mu.Lock()
	e := pc.closeErr
	pc.mu.Unlock()
	if e != nil {
		switch e.Code {
		case amqp.NotFound, amqp.AccessRefused, amqp.PreconditionFailed:
			return fmt.Errorf("channel closed by broker: %w", e)
		}
		return &lostError{cause: e}
	}
	return &lostError{cause: cause}
}
