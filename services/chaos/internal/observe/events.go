package observe

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// eventQueue is the run's own integrator queue, bound to event.#. It is a
// durable quorum queue, so events published while the observer is
// reconnecting (the broker restarts) wait for it.
const eventQueue = "chaos.events"

// taskEvents is what the observer saw of one task.
type taskEvents struct {
	// succeeded counts event.task.succeeded deliveries (the observer's own
	// redeliveries excluded); ids are their AMQP message ids.
	succeeded int
	ids       map[string]bool
	failed    int
}

// Observer counts the integrator events per task, as an integrator bound
// to event.# would receive them.
type Observer struct {
	urls []string // the broker's nodes, tried in turn
	next int      // the node the next connection tries first

	mu    sync.Mutex
	tasks map[uuid.UUID]*taskEvents
	seen  map[[32]byte]bool
	bad   int
	total int
	// emptyAt is when the last get that found the queue empty began.
	emptyAt time.Time
}

// NewObserver reads the events from the broker at url: one node, or the
// nodes of a cluster separated by commas.
func NewObserver(url string) *Observer {
	return &Observer{urls: strings.Split(url, ","), tasks: map[uuid.UUID]*taskEvents{}, seen: map[[32]byte]bool{}}
}

// Declare creates the queue and its binding (before any task exists).
func (o *Observer) Declare() error {
	conn, err := o.dial()
	if err != nil {
		return fmt.Errorf("events: connect: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("events: channel: %w", err)
	}
	if _, err := ch.QueueDeclare(eventQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return fmt.Errorf("events: declare %s: %w", eventQueue, err)
	}
	if err := ch.QueueBind(eventQueue, wire.EventPrefix+"#", wire.Exchange, false, nil); err != nil {
		return fmt.Errorf("events: bind %s: %w", eventQueue, err)
	}
	return nil
}

// dial connects to the first node that answers, starting after the one
// connected to last, so that a dead or cut node costs one failed dial.
func (o *Observer) dial() (*amqp.Connection, error) {
	var errs []error
	for range o.urls {
		url := o.urls[o.next%len(o.urls)]
		o.next++
		conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second), Heartbeat: 5 * time.Second})
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// Run consumes until ctx ends, reconnecting after every broker restart.
func (o *Observer) Run(ctx context.Context, logf func(string, ...any)) {
	failing := false
	for ctx.Err() == nil {
		err := o.consume(ctx)
		// One line per outage, not one per try.
		if err != nil && ctx.Err() == nil && !failing {
			logf("events: %v; reconnecting", err)
		}
		failing = err != nil
		stack.SleepCtx(ctx, time.Second)
	}
}

// consume reads the queue with basic.get, one message at a time, each
// recorded and acked before the next: when a get finds the queue empty,
// every event published before it has been counted.
func (o *Observer) consume(ctx context.Context) error {
	conn, err := o.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		started := time.Now()
		d, ok, err := ch.Get(eventQueue, false)
		if err != nil {
			return err
		}
		if !ok {
			o.mu.Lock()
			o.emptyAt = started
			o.mu.Unlock()
			stack.SleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		o.record(d)
		if err := d.Ack(false); err != nil {
			return err
		}
	}
	return nil
}

// record counts one delivery. A delivery the broker marks redelivered
// whose body the observer already saw is its own (its ack was lost with
// the connection), not the pipeline's; every first delivery counts, so a
// republished event (a new AMQP message) is counted even when its body is
// identical.
func (o *Observer) record(d amqp.Delivery) {
	sum := sha256.Sum256(d.Body)
	o.mu.Lock()
	defer o.mu.Unlock()
	if d.Redelivered && o.seen[sum] {
		return
	}
	o.seen[sum] = true
	o.total++
	var ev struct {
		Event  string    `json:"event"`
		TaskID uuid.UUID `json:"task_id"`
	}
	if err := json.Unmarshal(d.Body, &ev); err != nil || ev.TaskID == uuid.Nil {
		if d.RoutingKey != wire.EventPrefix+wire.EventWaitingAssigned {
			o.bad++
		}
		return
	}
	t := o.tasks[ev.TaskID]
	if t == nil {
		t = &taskEvents{ids: map[string]bool{}}
		o.tasks[ev.TaskID] = t
	}
	switch ev.Event {
	case wire.EventTaskSucceeded:
		t.succeeded++
		id := d.MessageId
		if id == "" {
			// No id to deduplicate by: every delivery is its own event.
			id = fmt.Sprintf("delivery-%d", o.total)
		}
		t.ids[id] = true
	case wire.EventTaskFailed:
		t.failed++
	}
}

// Drained waits (bounded) until the observer found the queue empty after
// the call began: every event published before then has been counted.
func (o *Observer) Drained(ctx context.Context, within time.Duration) error {
	since := time.Now()
	return stack.WaitUntil(ctx, within, "event queue drained", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.emptyAt.After(since)
	})
}

// Snapshot returns a copy of the per-task counts.
func (o *Observer) snapshot() (map[uuid.UUID]taskEvents, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[uuid.UUID]taskEvents, len(o.tasks))
	for id, t := range o.tasks {
		c := *t
		c.ids = make(map[string]bool, len(t.ids))
		for k := range t.ids {
			c.ids[k] = true
		}
		out[id] = c
	}
	return out, o.bad
}
