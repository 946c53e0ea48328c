package broker

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// withDial makes a Conn dial the broker with dial.
func withDial(dial func(network, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dial = dial }
}

// faultDialer dials the broker and keeps the connections it made, so that a
// test can make the latest one's writes fail with "connection reset by
// peer" while its reads go on: the order in which a broker restart shows
// itself when a write meets the reset before the reader does. amqp091-go
// then marks the connection closed only afterwards, from another goroutine.
type faultDialer struct {
	mu    sync.Mutex
	conns []*faultConn
}

func (d *faultDialer) dial(network, addr string) (net.Conn, error) {
	c, err := amqp.DefaultDial(defaultDialTimeout)(network, addr)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c}
	d.mu.Lock()
	d.conns = append(d.conns, fc)
	d.mu.Unlock()
	return fc, nil
}

// breakLatest makes every further write on the latest connection fail and
// returns how many connections have been dialed so far.
func (d *faultDialer) breakLatest() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns[len(d.conns)-1].broken.Store(true)
	return len(d.conns)
}

// dials returns how many connections have been dialed.
func (d *faultDialer) dials() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

type faultConn struct {
	net.Conn
	broken atomic.Bool
}

func (c *faultConn) Write(p []byte) (int, error) {
	if c.broken.Load() {
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: syscall.ECONNRESET}
	}
	return c.Conn.Write(p)
}

// TestChannelOpenRetriesWhenTheWriteFails: opening a channel whose channel.open write fails on a connection
// that amqp091-go has not yet marked closed waits for the new connection
// instead of failing the caller.
func TestChannelOpenRetriesWhenTheWriteFails(t *testing.T) {
	t.Parallel()
	var d faultDialer
	c := dial(t, testenv.AMQP(t), "fault-channel", withDial(d.dial), WithBackoff(time.Millisecond, 50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := 1; round <= 20; round++ {
		dialed := d.breakLatest()
		ch, err := c.Channel(ctx)
		if err != nil {
			t.Fatalf("round %d: open channel after a failed write: %v", round, err)
		}
		if d.dials() <= dialed {
			t.Fatalf("round %d: channel opened on the broken connection", round)
		}
		if _, err := ch.QueueDeclarePassive(wire.QueueASR, true, false, false, false, nil); err != nil {
			t.Fatalf("round %d: use the channel: %v", round, err)
		}
		_ = ch.Close()
	}
}

// TestInFlightPublishesSurviveFailedWrites: while
// several publishes are in flight, the connection's writes start failing,
// again and again; every publish still returns nil, each message is on the
// queue, and the publisher carries on over the new connections.
func TestInFlightPublishesSurviveFailedWrites(t *testing.T) {
	t.Parallel()
	url := testenv.AMQP(t)
	var d faultDialer
	c := dial(t, url, "fault-publish", withDial(d.dial), WithBackoff(time.Millisecond, 50*time.Millisecond))
	pub := NewPublisher(c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const (
		publishers = 8
		perRound   = 40 // publishes per publisher between two breaks
		rounds     = 10
	)
	var next atomic.Int64
	for round := 1; round <= rounds; round++ {
		// Break the connection when every publisher has a publish under
		// way, so that each break meets publishes in flight.
		var started, wg sync.WaitGroup
		started.Add(publishers)
		errs := make(chan error, publishers)
		for range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perRound {
					id := next.Add(1)
					if i == 1 {
						started.Done()
					}
					msg := amqp.Publishing{MessageId: strconv.FormatInt(id, 10), Body: []byte(`{}`)}
					if err := pub.Publish(ctx, wire.Exchange, wire.QueueASR, msg); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		started.Wait()
		d.breakLatest()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: publish in flight while the connection broke: %v", round, err)
		}
	}

	// Every confirmed message is on the queue; one whose confirm was lost
	// was published again, so it may be there twice.
	ch := rawChannel(t, url)
	deliveries, err := ch.Consume(wire.QueueASR, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for sent := int(next.Load()); len(seen) < sent; {
		select {
		case dl := <-deliveries:
			seen[dl.MessageId] = true
		case <-ctx.Done():
			t.Fatalf("%d of the %d confirmed messages reached %s", len(seen), sent, wire.QueueASR)
		}
	}
	if d.dials() < rounds+1 {
		t.Fatalf("%d connections dialed, want at least %d (one per break)", d.dials(), rounds+1)
	}
	if err := pub.Close(); err != nil && !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}
