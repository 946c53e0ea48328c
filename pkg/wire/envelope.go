package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Envelope is the common shape of every task.* and waiting.* message.
type Envelope struct {
	// TaskID is the task the message belongs to.
	TaskID uuid.UUID `json:"task_id"`
	// Step names the consumer and the payload's schema.
	Step string `json:"step"`
	// Attempt counts the attempts of this step, from 1.
	Attempt int `json:"attempt"`
	// TraceID correlates the logs of all messages of one task.
	TraceID string `json:"trace_id"`
	// CreatedAt is when the message was created.
	CreatedAt time.Time `json:"created_at"`
	// Payload holds the step's data; see UnmarshalPayload.
	Payload json.RawMessage `json:"payload"`
	// MessageID identifies this message (this attempt of this step): a
	// redelivery, or a republish of the outbox after a crash, carries the
	// same id, also as the AMQP message_id. Optional on the wire: messages
	// of older producers have none.
	MessageID uuid.UUID `json:"message_id,omitzero"`
}

// New returns the first attempt of a message for step. payload is encoded
// as JSON (nil means an empty object); an empty traceID gets a fresh one.
// The result is checked exactly as Decode checks a delivery, so New fails
// with an *InvalidError rather than build a message a consumer would
// dead-letter.
func New(step string, taskID uuid.UUID, traceID string, payload any) (*Envelope, error) {
	raw := json.RawMessage("{}")
	if payload != nil {
		var err error
		if raw, err = marshal(payload); err != nil {
			return nil, fmt.Errorf("encode %s payload: %w", step, err)
		}
	}
	if traceID == "" {
		traceID = NewTraceID()
	}
	e := &Envelope{
		TaskID:    taskID,
		Step:      step,
		Attempt:   1,
		TraceID:   traceID,
		CreatedAt: now(),
		Payload:   raw,
		MessageID: uuid.New(),
	}
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("new %s message: %w", step, err)
	}
	return e, nil
}

// Next returns the first attempt of a message for the following step of the
// same task and trace.
func (e *Envelope) Next(step string, payload any) (*Envelope, error) {
	return New(step, e.TaskID, e.TraceID, payload)
}

// Retry returns the message for the next attempt of the same step: the same
// task, trace and payload, attempt+1, created now, a new message id.
func (e *Envelope) Retry() *Envelope {
	r := *e
	r.Attempt++
	r.CreatedAt = now()
	r.MessageID = uuid.New()
	r.Payload = bytes.Clone(e.Payload)
	return &r
}

// Marshal encodes the envelope as JSON. It does not validate; messages built
// with New, Next and Retry are valid by construction.
func (e *Envelope) Marshal() ([]byte, error) {
	return marshal(e)
}

// RoutingKey returns the routing key the envelope is published under.
func (e *Envelope) RoutingKey() string { return RoutingKey(e.Step) }

// UnmarshalPayload decodes the payload into v, typically a pointer to the
// payload type of the envelope's step (ExtractAudio for extract_audio, ...).
func (e *Envelope) UnmarshalPayload(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("decode %s payload: %w", e.Step, err)
	}
	return nil
}

// check validates e as Decode would validate its encoding.
func (e *Envelope) check() error {
	body, err := e.Marshal()
	if err != nil {
		return fmt.Errorf("encode envelope: %w", err)
	}
	_, err = Decode(body)
	return err
}

// NewTraceID returns a fresh trace id.
func NewTraceID() string { return uuid.NewString() }

// now is the creation time of new messages: UTC, to the microsecond that
// Postgres keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// marshal encodes v as compact JSON without escaping <, > and & (which
// would grow a re-encoded message up to six times).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
