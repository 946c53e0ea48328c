package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// ErrClosed is returned by a Conn, and by the publishers and consumers on
// it, after Close.
var ErrClosed = errors.New("broker: connection closed")

// Default connection settings.
const (
	// DefaultMinBackoff is the wait before the first redial.
	DefaultMinBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff caps the wait between redials.
	DefaultMaxBackoff = 10 * time.Second
	// DefaultHeartbeat is the AMQP heartbeat interval asked of the broker.
	DefaultHeartbeat = 10 * time.Second

	defaultDialTimeout = 10 * time.Second
)

// Option configures Dial.
type Option func(*options)

type options struct {
	topology   *Topology
	metrics    *Metrics
	minBackoff time.Duration
	maxBackoff time.Duration
	heartbeat  time.Duration
	dial       func(network, addr string) (net.Conn, error) // nil: amqp.DefaultDial
}

// WithTopology declares t instead of the default topology after every
// (re)connect.
func WithTopology(t Topology) Option {
	return func(o *options) { o.topology = &t }
}

// WithoutTopology declares nothing after a (re)connect.
func WithoutTopology() Option {
	return func(o *options) { o.topology = nil }
}

// WithMetrics records reconnects, publish outcomes and subscriptions in m.
func WithMetrics(m *Metrics) Option {
	return func(o *options) { o.metrics = m }
}

// WithBackoff sets the redial backoff: the first retry waits about min, each
// further retry twice as long, never more than max.
func WithBackoff(min, max time.Duration) Option {
	return func(o *options) { o.minBackoff, o.maxBackoff = min, max }
}

// WithHeartbeat sets the AMQP heartbeat, which bounds how long a silently
// cut network goes unnoticed.
func WithHeartbeat(d time.Duration) Option {
	return func(o *options) { o.heartbeat = d }
}

// Conn is a self-healing AMQP connection. When the connection is lost (a
// broker restart, a forced close, a network cut noticed by the heartbeat) it
// redials with capped exponential backoff and re-declares the topology;
// publishers and consumers built on it wait for the new connection and
// carry on. A Conn is safe for concurrent use. Use one Conn for publishing
// and another for consuming.
type Conn struct {
	urls []string // the cluster's nodes, tried in turn
	name string
	log  zerolog.Logger
	opts options

	mu   sync.Mutex
	node int           // index in urls of the node last connected to
	cur  *session      // nil while disconnected
	up   chan struct{} // closed once cur is set; replaced when cur is lost

	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}

	running    atomic.Int32 // Consume loops running
	subscribed atomic.Int32 // of which currently have a live consumer
}

// session is one underlying connection; lost is closed when the supervisor
// has noticed that it died.
type session struct {
	conn *amqp.Connection
	addr string // host:port of the node it is connected to
	lost chan struct{}
}

// ParseURLs splits an AMQP_URL that names several nodes of one cluster,
// separated by commas ("amqp://u:p@rabbit-0:5672/,amqp://u:p@rabbit-1:5672/"),
// and checks each. A single URL is a cluster of one.
func ParseURLs(s string) ([]string, error) {
	var urls []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if _, err := amqp.ParseURI(part); err != nil {
			return nil, fmt.Errorf("broker url %d: %w", len(urls)+1, err)
		}
		urls = append(urls, part)
	}
	if len(urls) == 0 {
		return nil, errors.New("no broker url")
	}
	return urls, nil
}

// Dial connects to url and returns a Conn that keeps itself connected until
// Close. url may name several nodes of a cluster, separated by commas
// (ParseURLs): Dial connects to the first that answers, and after a loss the
// Conn tries the next node first, going round the list, so that it fails over
// when the node it was connected to dies. name is shown in the broker's
// connection list and labels logs and metrics. Dial retries with backoff
// until the first connection succeeds or ctx is done. By default the topology
// of Topology{} is declared after every connect.
func Dial(ctx context.Context, url, name string, log zerolog.Logger, opts ...Option) (*Conn, error) {
	o := options{
		topology:   &Topology{},
		minBackoff: DefaultMinBackoff,
		maxBackoff: DefaultMaxBackoff,
		heartbeat:  DefaultHeartbeat,
	}
	for _, opt := range opts {
		opt(&o)
	}
	urls, err := ParseURLs(url)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", name, err)
	}
	if o.topology != nil {
		if err := o.topology.Validate(); err != nil {
			return nil, fmt.Errorf("dial %s: %w", name, err)
		}
	}
	c := &Conn{
		urls:    urls,
		name:    name,
		log:     log.With().Str("conn", name).Logger(),
		opts:    o,
		up:      make(chan struct{}),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	var s *session
	for attempt := 1; ; attempt++ {
		s, err = c.connectAny(0)
		if err == nil {
			break
		}
		c.log.Warn().Err(err).Int("attempt", attempt).Msg("broker connect failed")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial %s: %w", name, errors.Join(ctx.Err(), err))
		case <-time.After(c.backoff(attempt)):
		}
	}
	c.log.Info().Str("broker", s.addr).Msg("broker connected")
	go c.supervise(s)
	return c, nil
}

// Addr returns host:port of the node c is connected to, or "" while it is
// reconnecting.
func (c *Conn) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return ""
	}
	return c.cur.addr
}

// connectAny tries every node once, starting with urls[from], and returns
// the first connection made; the errors of all when none answers.
func (c *Conn) connectAny(from int) (*session, error) {
	var errs []error
	for i := range c.urls {
		n := (from + i) % len(c.urls)
		conn, err := c.connect(c.urls[n])
		if err == nil {
			c.mu.Lock()
			c.node = n
			c.mu.Unlock()
			return &session{conn: conn, addr: hostPort(c.urls[n]), lost: make(chan struct{})}, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", hostPort(c.urls[n]), err))
	}
	return nil, errors.Join(errs...)
}

// hostPort is the address of a URL that ParseURLs accepted, for logs.
func hostPort(url string) string {
	uri, err := amqp.ParseURI(url)
	if err != nil {
		return "?"
	}
	return net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
}

// Name returns the connection name given to Dial.
func (c *Conn) Name() string { return c.name }

// Close closes the connection and stops redialing. Publishers and
// consumers on c fail with ErrClosed afterwards. Close is idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	<-c.done
	return nil
}

// Consuming reports whether at least one Consume loop runs on c and every
// one of them currently has a live consumer. It is meant for /readyz.
func (c *Conn) Consuming() bool {
	running := c.running.Load()
	return running > 0 && c.subscribed.Load() == running
}

// Connected reports whether c currently has a live connection.
func (c *Conn) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil && !c.cur.conn.IsClosed()
}

// Channel opens a channel on the current connection, waiting for a
// reconnect if c is down and opening again if an open fails; it returns an
// error only once ctx is done or c is closed. The caller owns the channel: it must drain every
// notification channel it registers and close it when done. The channel
// does not survive a reconnect.
func (c *Conn) Channel(ctx context.Context) (*amqp.Channel, error) {
	ch, _, err := c.channel(ctx)
	return ch, err
}

func (c *Conn) channel(ctx context.Context) (*amqp.Channel, *session, error) {
	for attempt := 1; ; attempt++ {
		s, err := c.session(ctx)
		if err != nil {
			return nil, nil, err
		}
		ch, err := s.conn.Channel()
		if err == nil {
			return ch, s, nil
		}
		// A failed open means the connection is dying — amqp091-go marks it
		// closed only after the failed write, in another goroutine, so
		// IsClosed may still say false here — or the broker refuses a
		// channel for now. Either way wait for the supervisor to notice the
		// loss, or back off, and open again, until ctx is done.
		c.log.Debug().Err(err).Int("attempt", attempt).Msg("open channel failed, retrying")
		select {
		case <-s.lost:
		case <-time.After(c.backoff(attempt)):
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("open channel: %w", errors.Join(ctx.Err(), err))
		case <-c.closing:
			return nil, nil, ErrClosed
		}
	}
}

func (c *Conn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// session returns the live session, waiting while c is reconnecting.
func (c *Conn) session(ctx context.Context) (*session, error) {
	for {
		select {
		case <-c.closing:
			return nil, ErrClosed
		default:
		}
		c.mu.Lock()
		s, up := c.cur, c.up
		c.mu.Unlock()
		if s != nil && !s.conn.IsClosed() {
			return s, nil
		}
		wait := up
		if s != nil {
			wait = s.lost
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for broker connection %s: %w", c.name, ctx.Err())
		case <-c.closing:
			return nil, ErrClosed
		}
	}
}

// connect dials url once and declares the topology.
func (c *Conn) connect(url string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props["connection_name"] = c.name
	dial := c.opts.dial
	if dial == nil {
		dial = amqp.DefaultDial(defaultDialTimeout)
	}
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:  c.opts.heartbeat,
		Locale:     "en_US",
		Properties: props,
		Dial:       dial,
	})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	if c.opts.topology == nil {
		return conn, nil
	}
	ch, err := conn.Channel()
	if err == nil {
		err = c.opts.topology.Declare(ch)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("declare topology: %w", err)
	}
	if err := ch.Close(); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("close declaring channel: %w", err)
	}
	return conn, nil
}

// supervise owns the connection: it publishes it to waiters, drains its
// close and blocked notifications, and redials when it is lost.
func (c *Conn) supervise(s *session) {
	defer close(c.done)
	for {
		reason, closing := c.watch(s)
		if closing {
			return
		}
		ev := c.log.Warn().Str("broker", s.addr)
		if reason != nil {
			ev = ev.Int("code", reason.Code).Str("reason", reason.Reason)
		}
		ev.Msg("broker connection lost")
		if s = c.redial(); s == nil {
			return
		}
	}
}

// watch publishes s to waiters and follows it until it is lost (its close
// reason) or c is closed (closing, s closed).
func (c *Conn) watch(s *session) (reason *amqp.Error, closing bool) {
	closed := s.conn.NotifyClose(make(chan *amqp.Error, 1))
	blocked := s.conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	c.mu.Lock()
	c.cur = s
	close(c.up)
	c.mu.Unlock()
	for {
		select {
		case b, ok := <-blocked:
			if !ok {
				blocked = nil
				continue
			}
			if b.Active {
				c.log.Warn().Str("reason", b.Reason).Msg("broker blocked the connection")
			} else {
				c.log.Info().Msg("broker unblocked the connection")
			}
		case reason = <-closed:
			c.mu.Lock()
			c.cur = nil
			c.up = make(chan struct{})
			c.mu.Unlock()
			close(s.lost)
			return reason, false
		case <-c.closing:
			c.mu.Lock()
			c.cur = nil
			c.mu.Unlock()
			if err := s.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
				c.log.Warn().Err(err).Msg("broker close")
			}
			close(s.lost)
			c.log.Info().Msg("broker connection closed")
			return nil, true
		}
	}
}

// redial connects again with backoff until it succeeds (the new session) or
// c is closed (nil). With several nodes it tries the one after the node just
// lost first, so that it fails over instead of waiting for a dead node.
func (c *Conn) redial() *session {
	c.mu.Lock()
	from := (c.node + 1) % len(c.urls)
	c.mu.Unlock()
	if len(c.urls) == 1 {
		from = 0
	}
	for attempt := 1; ; attempt++ {
		select {
		case <-c.closing:
			return nil
		case <-time.After(c.backoff(attempt)):
		}
		s, err := c.connectAny(from)
		if err == nil {
			c.log.Info().Int("attempts", attempt).Str("broker", s.addr).Msg("broker connection restored")
			c.opts.metrics.reconnected(c.name)
			return s
		}
		ev := c.log.Debug()
		if attempt <= 3 || attempt%10 == 0 {
			ev = c.log.Warn()
		}
		ev.Err(err).Int("attempt", attempt).Msg("broker reconnect failed")
	}
}

// backoff is the wait before redial attempt n (from 1): exponential from
// minBackoff, capped at maxBackoff, with jitter in [d/2, d].
func (c *Conn) backoff(attempt int) time.Duration {
	d := c.opts.minBackoff
	for i := 1; i < attempt && d < c.opts.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.opts.maxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Pair is the two connections a worker needs: one to publish on, one to
// consume from, so that flow control on publishing never holds up acks.
type Pair struct {
	// Publish is the connection for NewPublisher.
	Publish *Conn
	// Consume is the connection for Consume.
	Consume *Conn
}

// DialPair dials name+"-publish" and name+"-consume" to url with the same
// options.
func DialPair(ctx context.Context, url, name string, log zerolog.Logger, opts ...Option) (*Pair, error) {
	pub, err := Dial(ctx, url, name+"-publish", log, opts...)
	if err != nil {
		return nil, err
	}
	sub, err := Dial(ctx, url, name+"-consume", log, opts...)
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	return &Pair{Publish: pub, Consume: sub}, nil
}

// Close closes both connections.
func (p *Pair) Close() error {
	return errors.Join(p.Consume.Close(), p.Publish.Close())
}
