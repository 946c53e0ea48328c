package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// acker settles deliveries without a broker.
type acker struct{}

func (acker) Ack(uint64, bool) error        { return nil }
func (acker) Nack(uint64, bool, bool) error { return nil }
func (acker) Reject(uint64, bool) error     { return nil }

// TestADispatcherTakesTheNextDeliveryAndEndsWithConsume: a handler
// goroutine that finished a delivery waits for the next one (a hand-over
// on the unbuffered idle channel succeeds only while one waits), runs it,
// frees each delivery's slot, and ends when Consume returns (stop).
func TestADispatcherTakesTheNextDeliveryAndEndsWithConsume(t *testing.T) {
	t.Parallel()
	handled := make(chan uint64, 2)
	cs := &consumer{
		handle: func(_ context.Context, d *Delivery) {
			if err := d.Ack(); err != nil {
				t.Error(err)
			}
			handled <- d.DeliveryTag
		},
		hctx:  context.Background(),
		slots: make(chan struct{}, 2),
		idle:  make(chan dispatchJob),
		stop:  make(chan struct{}),
	}
	var inflight sync.WaitGroup
	job := func(tag uint64) dispatchJob {
		cs.slots <- struct{}{}
		inflight.Add(1)
		cs.all.Add(1)
		return dispatchJob{d: &Delivery{Delivery: amqp.Delivery{Acknowledger: acker{}, DeliveryTag: tag}}, inflight: &inflight}
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		cs.dispatcher(job(1))
	}()
	if tag := <-handled; tag != 1 {
		t.Fatalf("handled %d, want 1", tag)
	}
	select {
	case cs.idle <- job(2):
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher did not wait for a next delivery")
	}
	if tag := <-handled; tag != 2 {
		t.Fatalf("handled %d, want 2", tag)
	}
	inflight.Wait()
	cs.all.Wait()
	if n := len(cs.slots); n != 0 {
		t.Errorf("%d slots still taken after both deliveries", n)
	}
	close(cs.stop)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher did not end when Consume returned")
	}
}
