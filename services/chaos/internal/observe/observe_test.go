package observe

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestMetricSumAcrossRestarts(t *testing.T) {
	m := NewMetricSum("dubflow_reconciler_actions_total")
	page := func(lease, stuck float64) *bufio.Scanner {
		return bufio.NewScanner(strings.NewReader(
			"# HELP dubflow_reconciler_actions_total x\n" +
				`dubflow_reconciler_actions_total{action="lease_redriven",step="asr"} ` + ftoa(lease) + "\n" +
				`dubflow_reconciler_actions_total{action="task_redriven",step="asr"} ` + ftoa(stuck) + "\n" +
				"other_metric 5\n"))
	}
	m.add(page(1, 2))
	m.add(page(1, 5))
	// A restart the supervisor reports: the new process counts from 0,
	// even when its first value is not below the last one.
	m.Restarted()
	m.add(page(2, 6))
	// A reset seen only in the values.
	m.add(page(0, 1))
	got := m.ByLabel("action")
	if got["lease_redriven"] != 3 || got["task_redriven"] != 12 || len(got) != 2 {
		t.Fatalf("sums %v, want lease_redriven=3 task_redriven=12", got)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestObserverCountsEachPublishOnce(t *testing.T) {
	o := NewObserver("")
	id := uuid.New()
	body := []byte(`{"event":"task.succeeded","task_id":"` + id.String() + `","status":"done","occurred_at":"2026-01-01T00:00:00Z"}`)
	o.record(amqp.Delivery{Body: body, MessageId: "m1", RoutingKey: "event.task.succeeded"})
	// The observer's own redelivery (its ack was lost): not counted.
	o.record(amqp.Delivery{Body: body, MessageId: "m1", Redelivered: true, RoutingKey: "event.task.succeeded"})
	got, _ := o.snapshot()
	if got[id].succeeded != 1 {
		t.Fatalf("after a redelivery: %d success events, want 1", got[id].succeeded)
	}
	// The pipeline publishing the same event again: counted, same id.
	o.record(amqp.Delivery{Body: body, MessageId: "m1", RoutingKey: "event.task.succeeded"})
	got, _ = o.snapshot()
	if got[id].succeeded != 2 || len(got[id].ids) != 1 {
		t.Fatalf("after a republish: %+v", got[id])
	}
	// A second success under another id.
	o.record(amqp.Delivery{Body: body, MessageId: "m2", RoutingKey: "event.task.succeeded"})
	got, bad := o.snapshot()
	if got[id].succeeded != 3 || len(got[id].ids) != 2 || bad != 0 {
		t.Fatalf("after a second event: %+v, bad %d", got[id], bad)
	}
}
