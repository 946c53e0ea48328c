// Package inspect reads the broker's queues as the console shows them:
// their depth and consumers by AMQP passive declare (no management plugin
// needed), for the health page and the history, and as Prometheus metrics
// on each scrape.
package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
)

// State is one queue: ready and consumers as a passive declare
// reports them, unacknowledged derived from the step attempts.
type State struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Ready     int    `json:"ready"`
	Consumers int    `json:"consumers"`
	// Unacknowledged is derived, not read from the broker (a passive
	// declare reports only ready messages and consumers): for a work queue,
	// the step attempts running now with a live lease — each holds its
	// delivery unacknowledged until it ends; 0 for a delay queue, which
	// has no consumers; null where it cannot be derived (dlq,
	// compensation, waiting, events).
	Unacknowledged *int `json:"unacknowledged"`
	// Missing is set when the queue does not exist.
	Missing bool `json:"missing,omitempty"`
}

// Inspector reads queues' depth and consumers.
type Inspector interface {
	Inspect(ctx context.Context, names []string) (map[string]State, error)
}

// Watched lists every queue the health page shows, with its kind.
func Watched() []State {
	var qs []State
	for _, q := range wire.WorkQueues {
		qs = append(qs, State{Name: q, Kind: "work"})
	}
	for _, d := range broker.DefaultDelayTiers {
		qs = append(qs, State{Name: wire.DelayQueue(d), Kind: "delay"})
	}
	return append(qs, State{Name: wire.QueueDLQ, Kind: "dlq"},
		State{Name: wire.QueueTTSCompensation, Kind: "compensation"},
		State{Name: wire.QueueWaiting, Kind: "waiting"},
		State{Name: wire.QueueStreamEnd, Kind: "events"})
}

// AMQP reads queues by AMQP passive declares (no management
// plugin needed). A missing queue closes the channel; the next opens anew.
type AMQP struct{ Conn *broker.Conn }

// Inspect reads the queues names.
func (a AMQP) Inspect(ctx context.Context, names []string) (map[string]State, error) {
	out := make(map[string]State, len(names))
	var ch *amqp.Channel
	defer func() {
		if ch != nil {
			_ = ch.Close()
		}
	}()
	for _, name := range names {
		if ch == nil {
			var err error
			if ch, err = a.Conn.Channel(ctx); err != nil {
				return nil, fmt.Errorf("inspect queues: %w", err)
			}
		}
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			if e, ok := err.(*amqp.Error); ok && e.Code == amqp.NotFound {
				out[name] = State{Name: name, Missing: true}
				ch = nil
				continue
			}
			return nil, fmt.Errorf("inspect queue %s: %w", name, err)
		}
		out[name] = State{Name: name, Ready: q.Messages, Consumers: q.Consumers}
	}
	return out, nil
}

// Collector exports every watched queue's depth and consumers on each
// scrape of /metrics.
type Collector struct {
	inspect  Inspector
	messages *prometheus.GaugeVec
	consumer *prometheus.GaugeVec
}

// NewCollector returns the collector of the queues in reads.
func NewCollector(in Inspector) *Collector {
	return &Collector{inspect: in,
		messages: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dubflow_queue_messages",
			Help: "Messages ready in the queue (AMQP passive declare)."}, []string{"queue"}),
		consumer: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dubflow_queue_consumers",
			Help: "Consumers on the queue (AMQP passive declare)."}, []string{"queue"})}
}

// Describe sends the metrics' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.messages.Describe(ch)
	c.consumer.Describe(ch)
}

// Collect reads the queues; a failed read exports the last.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var names []string
	for _, q := range Watched() {
		names = append(names, q.Name)
	}
	states, err := c.inspect.Inspect(ctx, names)
	if err == nil {
		c.messages.Reset()
		c.consumer.Reset()
		for _, st := range states {
			if !st.Missing {
				c.messages.WithLabelValues(st.Name).Set(float64(st.Ready))
				c.consumer.WithLabelValues(st.Name).Set(float64(st.Consumers))
			}
		}
	}
	c.messages.Collect(ch)
	c.consumer.Collect(ch)
}

// Ready reads the ready messages of every watched queue that exists, by
// name.
func Ready(ctx context.Context, in Inspector) (map[string]int, error) {
	var names []string
	for _, q := range Watched() {
		names = append(names, q.Name)
	}
	states, err := in.Inspect(ctx, names)
	if err != nil {
		return nil, err
	}
	ready := make(map[string]int, len(states))
	for _, st := range states {
		if !st.Missing {
			ready[st.Name] = st.Ready
		}
	}
	return ready, nil
}
