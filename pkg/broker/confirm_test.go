package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP 0-9-1 frame layout: type (1 byte), channel (2), payload size (4),
// payload, frame end (0xCE). A method frame's payload starts with its
// class and method ids; basic.ack and basic.nack carry the same arguments
// (a delivery tag and a flags octet whose first bit is "multiple").
const (
	frameMethod   = 1
	frameHeader   = 7
	classBasic    = 60
	methodAck     = 80
	methodNack    = 120
	frameEndBytes = 1
)

// confirmFaults rewrites the publisher confirms a real broker sends over
// the connections a confirmDialer made: the next nack acks become nacks
// (all of them while nack is negative) and the next drop acks never
// arrive, as when a quorum queue loses its leader mid-publish.
type confirmFaults struct {
	nack atomic.Int64
	drop atomic.Int64

	nacked  atomic.Int64
	dropped atomic.Int64
}

// dial dials the broker through a connection that applies f.
func (f *confirmFaults) dial(network, addr string) (net.Conn, error) {
	c, err := amqp.DefaultDial(defaultDialTimeout)(network, addr)
	if err != nil {
		return nil, err
	}
	return &confirmConn{Conn: c, f: f}, nil
}

// take consumes one unit of n (negative: unlimited) and reports whether
// there was one.
func take(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v == 0 {
			return false
		}
		if v < 0 || n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// confirmConn reads whole frames from the broker and rewrites or drops the
// basic.acks its confirmFaults asks for; every other frame passes as is.
type confirmConn struct {
	net.Conn
	f *confirmFaults

	mu  sync.Mutex
	in  []byte // read from the broker, not yet a whole frame
	out []byte // frames ready for the client
}

func (c *confirmConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := make([]byte, 32<<10)
	for len(c.out) == 0 {
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		c.frames()
		if err != nil && len(c.out) == 0 {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// frames moves every whole frame of c.in to c.out, applying the faults.
func (c *confirmConn) frames() {
	for len(c.in) >= frameHeader {
		size := int(binary.BigEndian.Uint32(c.in[3:7]))
		total := frameHeader + size + frameEndBytes
		if len(c.in) < total {
			return
		}
		frame := c.in[:total]
		c.in = c.in[total:]
		if frame[0] == frameMethod && size >= 4 &&
			binary.BigEndian.Uint16(frame[7:9]) == classBasic && binary.BigEndian.Uint16(frame[9:11]) == methodAck {
			if take(&c.f.drop) {
				c.f.dropped.Add(1)
				continue
			}
			if take(&c.f.nack) {
				c.f.nacked.Add(1)
				frame = append([]byte(nil), frame...)
				binary.BigEndian.PutUint16(frame[9:11], methodNack)
			}
		}
		c.out = append(c.out, frame...)
	}
}

// copiesOn takes every message on queue and returns them.
func copiesOn(t *testing.T, ch *amqp.Channel, queue string, want int) []amqp.Delivery {
	t.Helper()
	var got []amqp.Delivery
	for range want {
		got = append(got, getOne(t, ch, queue, 10*time.Second))
	}
	if d, ok, _ := ch.Get(queue, true); ok {
		t.Fatalf("more than %d copies on %s: another with message id %q", want, queue, d.MessageId)
	}
	return got
}

// sameMessage checks that every copy carries the message id and publish id
// of the first: a retry publishes the message unchanged.
func sameMessage(t *testing.T, copies []amqp.Delivery, messageID string) {
	t.Helper()
	pubID := copies[0].Headers[PublishIDHeader]
	for i, d := range copies {
		if d.MessageId != messageID || d.Headers[PublishIDHeader] != pubID {
			t.Errorf("copy %d: message id %q, publish id %v; want %q and %v", i+1, d.MessageId, d.Headers[PublishIDHeader], messageID, pubID)
		}
	}
}

// TestNackThenAckSucceeds: the broker nacks a publish once (as a quorum
// queue does while it elects a new leader); Publish publishes the message
// again, unchanged, and returns nil once that copy is acked.
func TestNackThenAckSucceeds(t *testing.T) {
	t.Parallel()
	var f confirmFaults
	f.nack.Store(1)
	reg, m := newMetrics(t)
	url := testenv.AMQP(t)
	ch := rawChannel(t, url)
	q, err := ch.QueueDeclare("nack-then-ack", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(dial(t, url, "nack-test", withDial(f.dial), WithMetrics(m)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.Publish(ctx, "", q.Name, amqp.Publishing{MessageId: "m-1", Body: []byte(`{}`)}); err != nil {
		t.Fatalf("publish nacked once: %v", err)
	}
	if f.nacked.Load() != 1 {
		t.Fatalf("%d confirms turned into nacks, want 1", f.nacked.Load())
	}
	// The nacked copy reached the queue all the same (the fault rewrote
	// the broker's ack): the retry is a duplicate with the same ids.
	sameMessage(t, copiesOn(t, ch, q.Name, 2), "m-1")
	if n := counter(t, reg, "dubflow_broker_publish_retries_total", map[string]string{"reason": "nack"}); n != 1 {
		t.Errorf("publish_retries_total{reason=nack} = %v, want 1", n)
	}
	if n := counter(t, reg, "dubflow_broker_publishes_total", map[string]string{"result": "ack"}); n != 1 {
		t.Errorf("publishes_total{result=ack} = %v, want 1", n)
	}
}

// TestPersistentNackFailsWithItsReason: a broker that nacks every copy
// makes Publish fail with ErrNacked once the refusal patience has passed,
// saying how often, for how long and why; a caller's deadline reached while
// the broker nacks fails the same way, not as a timeout.
func TestPersistentNackFailsWithItsReason(t *testing.T) {
	t.Parallel()
	var f confirmFaults
	f.nack.Store(-1)
	url := testenv.AMQP(t)
	ch := rawChannel(t, url)
	q, err := ch.QueueDeclare("always-nacked", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, url, "always-nacked", withDial(f.dial))

	t.Run("Patience", func(t *testing.T) {
		pub := NewPublisher(conn, WithRefusalPatience(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		err := pub.Publish(ctx, "", q.Name, amqp.Publishing{Body: []byte(`{}`)})
		elapsed := time.Since(start)
		checkRefused(t, err, ErrNacked, "nacked", "length limit")
		if elapsed < time.Second || elapsed > 20*time.Second {
			t.Errorf("gave up after %s, want about the patience of 1s", elapsed)
		}
	})
	t.Run("CallerDeadline", func(t *testing.T) {
		pub := NewPublisher(conn)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := pub.Publish(ctx, "", q.Name, amqp.Publishing{Body: []byte(`{}`)})
		checkRefused(t, err, ErrNacked, "nacked", "length limit")
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %q is a timeout; want the refusal alone", err)
		}
	})
	if f.nacked.Load() < 4 {
		t.Errorf("%d nacks in all, want several retries per publish", f.nacked.Load())
	}
}

// TestFullQueueNackFailsWithItsReason: the same without a rewritten frame,
// from a real refusal: a queue at its length limit with reject-publish
// overflow nacks every copy until Publish gives up with ErrNacked.
func TestFullQueueNackFailsWithItsReason(t *testing.T) {
	t.Parallel()
	url := testenv.AMQP(t)
	ch := rawChannel(t, url)
	q, err := ch.QueueDeclare("full", true, false, false, false, amqp.Table{"x-max-length": 1, "x-overflow": "reject-publish"})
	if err != nil {
		t.Fatal(err)
	}
	reg, m := newMetrics(t)
	pub := NewPublisher(dial(t, url, "full-queue", WithMetrics(m)), WithRefusalPatience(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pub.Publish(ctx, "", q.Name, amqp.Publishing{Body: []byte(`{"first":1}`)}); err != nil {
		t.Fatalf("first publish, queue not yet full: %v", err)
	}
	err = pub.Publish(ctx, "", q.Name, amqp.Publishing{Body: []byte(`{"second":2}`)})
	checkRefused(t, err, ErrNacked, "nacked", "length limit")
	if n := counter(t, reg, "dubflow_broker_publish_retries_total", map[string]string{"reason": "nack"}); n < 2 {
		t.Errorf("publish_retries_total{reason=nack} = %v, want the retries counted", n)
	}
}

// TestMissingConfirmTimesOutAndRetries: a confirm that never arrives on an
// open channel makes Publish publish the message again after the confirm
// timeout; the second copy's confirm ends it. A confirm that never comes,
// copy after copy, fails with ErrUnconfirmed.
func TestMissingConfirmTimesOutAndRetries(t *testing.T) {
	t.Parallel()
	var f confirmFaults
	f.drop.Store(1)
	reg, m := newMetrics(t)
	url := testenv.AMQP(t)
	ch := rawChannel(t, url)
	q, err := ch.QueueDeclare("unconfirmed", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	pub := NewPublisher(dial(t, url, "unconfirmed", withDial(f.dial), WithMetrics(m)),
		WithConfirmTimeout(timeout), WithRefusalPatience(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := pub.Publish(ctx, "", q.Name, amqp.Publishing{MessageId: "m-2", Body: []byte(`{}`)}); err != nil {
		t.Fatalf("publish whose first confirm was lost: %v", err)
	}
	if elapsed := time.Since(start); elapsed < timeout {
		t.Errorf("returned after %s, before the confirm timeout of %s", elapsed, timeout)
	}
	if f.dropped.Load() != 1 {
		t.Fatalf("%d confirms dropped, want 1", f.dropped.Load())
	}
	sameMessage(t, copiesOn(t, ch, q.Name, 2), "m-2")
	if n := counter(t, reg, "dubflow_broker_publish_retries_total", map[string]string{"reason": "unconfirmed"}); n != 1 {
		t.Errorf("publish_retries_total{reason=unconfirmed} = %v, want 1", n)
	}

	f.drop.Store(-1)
	err = pub.Publish(ctx, "", q.Name, amqp.Publishing{Body: []byte(`{}`)})
	checkRefused(t, err, ErrUnconfirmed, "no confirm within 300ms", "without a leader")
}

// checkRefused checks that err is want and that its text says the words.
func checkRefused(t *testing.T, err, want error, words ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("publish: %v, want %v", err, want)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	t.Logf("publish failed as it should: %v", err)
}
