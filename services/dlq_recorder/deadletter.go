package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Sources of a dead letter, as stored in dead_letters.source.
const (
	// sourceService: a worker's dead-letter envelope (wire.DeadLetter).
	sourceService = "service"
	// sourceBroker: a message the broker dead-lettered by itself; the body
	// is the original message and x-death says why.
	sourceBroker = "broker"
	// sourceUnknown: a body that is neither; kept raw.
	sourceUnknown = "unknown"
)

// deadLetter is what the recorder stores for one message of task.dlq.
type deadLetter struct {
	MessageID  string
	TaskID     *uuid.UUID
	TraceID    string
	Step       string
	Part       string
	Attempt    int
	ErrorClass string
	Reason     string
	// Original is the failed message when it is JSON (nil otherwise); Raw is
	// the delivery's body as received.
	Original   []byte
	Raw        []byte
	RoutingKey string
	Source     string
	FailedAt   time.Time
}

// messageID names a delivery for deduplication: its AMQP message id, or a
// hash of its body when it has none.
func messageID(id string, body []byte) string {
	if id != "" {
		return id
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// parseDeadLetter reads one delivery of task.dlq. It never fails: whatever
// cannot be read is recorded as such, so that nothing is lost.
func parseDeadLetter(d step.Delivery, now time.Time) *deadLetter {
	dl := &deadLetter{MessageID: messageID(d.MessageID, d.Body), Raw: d.Body, RoutingKey: d.RoutingKey, FailedAt: now.UTC()}
	death, dead := lastDeath(d.Headers)
	if env, ok := readServiceEnvelope(d.Body); ok && !dead {
		dl.Source = sourceService
		dl.ErrorClass = env.ErrorClass
		dl.Reason = env.FailureReason
		dl.Attempt = env.Attempt
		dl.Step = env.Step
		dl.TraceID = env.TraceID
		if !env.FailedAt.IsZero() {
			dl.FailedAt = env.FailedAt.UTC()
		}
		if env.TaskID != uuid.Nil {
			id := env.TaskID
			dl.TaskID = &id
		}
		if original, err := env.OriginalBody(); err == nil {
			dl.describeOriginal(original)
		} else {
			dl.Reason = strings.TrimSpace(dl.Reason + "; original message unreadable: " + err.Error())
		}
		if dl.RoutingKey == "" || dl.RoutingKey == wire.RoutingKeyDLQ {
			// The queue the worker consumed it from, or its step's.
			dl.RoutingKey = env.Queue
			if dl.RoutingKey == "" {
				dl.RoutingKey = wire.RoutingKey(dl.Step)
			}
		}
		return dl
	}
	if dead {
		dl.Source = sourceBroker
		dl.ErrorClass = wire.ClassBroker
		dl.Reason = death.describe()
		if !death.Time.IsZero() {
			dl.FailedAt = death.Time.UTC()
		}
		if death.RoutingKey != "" {
			dl.RoutingKey = death.RoutingKey
		}
	} else {
		dl.Source = sourceUnknown
		dl.ErrorClass = wire.ClassInvalid
		dl.Reason = "message in task.dlq is neither a dead-letter envelope nor dead-lettered by the broker"
	}
	dl.describeOriginal(d.Body)
	return dl
}

// describeOriginal keeps the failed message and fills in what it says about
// itself (task, step, part, attempt) where the dead letter did not.
func (dl *deadLetter) describeOriginal(original []byte) {
	if !json.Valid(original) {
		return
	}
	dl.Original = original
	if env, err := wire.Decode(original); err == nil {
		dl.fill(env.TaskID, env.Step, env.Attempt, env.TraceID)
		if part, err := step.PartOf(env); err == nil {
			dl.Part = part
		}
		return
	}
	// Invalid envelopes still say what they can.
	if head, ok := wire.PeekHead(original); ok {
		dl.fill(head.TaskID, head.Step, head.Attempt, head.TraceID)
	}
}

func (dl *deadLetter) fill(taskID uuid.UUID, stepName string, attempt int, traceID string) {
	if dl.TaskID == nil && taskID != uuid.Nil {
		dl.TaskID = &taskID
	}
	if dl.Step == "" {
		dl.Step = stepName
	}
	if dl.Attempt == 0 {
		dl.Attempt = attempt
	}
	if dl.TraceID == "" {
		dl.TraceID = traceID
	}
}

// readServiceEnvelope decodes a worker's dead-letter envelope (wire.DeadLetter). A body that
// fails the schema but still has original_message and failure_reason is
// accepted as one, so that its details are not lost.
func readServiceEnvelope(body []byte) (*wire.DeadLetter, bool) {
	if env, err := wire.DecodeDeadLetter(body); err == nil {
		return env, true
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(body, &probe) != nil {
		return nil, false
	}
	if _, ok := probe["original_message"]; !ok {
		return nil, false
	}
	if _, ok := probe["failure_reason"]; !ok {
		return nil, false
	}
	var env wire.DeadLetter
	if err := json.Unmarshal(body, &env); err != nil {
		// Keep what can be kept: the reason, the original as is.
		var reason string
		_ = json.Unmarshal(probe["failure_reason"], &reason)
		return &wire.DeadLetter{OriginalMessage: probe["original_message"], FailureReason: reason,
			ErrorClass: wire.ClassInvalid}, true
	}
	return &env, true
}

// death is the most recent x-death entry of a dead-lettered message. It is
// information only: the application never counts attempts with it.
type death struct {
	Reason     string
	Queue      string
	Count      int64
	Time       time.Time
	RoutingKey string
}

func (d death) describe() string {
	reason := d.Reason
	switch d.Reason {
	case "delivery_limit":
		reason = "delivery limit reached (poison message)"
	case "expired":
		reason = "message TTL expired"
	case "rejected":
		reason = "rejected without requeue"
	case "maxlen":
		reason = "queue length limit exceeded"
	}
	s := fmt.Sprintf("dead-lettered by the broker from %s: %s", d.Queue, reason)
	if d.Count > 1 {
		s += fmt.Sprintf(" (%d times)", d.Count)
	}
	return s
}

// lastDeath reads the most recent dead-lettering from the x-death header
// (RabbitMQ keeps the latest entry first).
func lastDeath(h amqp.Table) (death, bool) {
	entries, ok := h["x-death"].([]any)
	if !ok || len(entries) == 0 {
		if reason, ok := h["x-first-death-reason"].(string); ok {
			queue, _ := h["x-first-death-queue"].(string)
			return death{Reason: reason, Queue: queue}, true
		}
		return death{}, false
	}
	t, ok := entries[0].(amqp.Table)
	if !ok {
		return death{Reason: "unknown"}, true
	}
	var d death
	d.Reason, _ = t["reason"].(string)
	d.Queue, _ = t["queue"].(string)
	d.Count, _ = t["count"].(int64)
	d.Time, _ = t["time"].(time.Time)
	if keys, ok := t["routing-keys"].([]any); ok && len(keys) > 0 {
		d.RoutingKey, _ = keys[0].(string)
	}
	return d, true
}
