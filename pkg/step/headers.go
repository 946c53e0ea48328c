package step

import (
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Name spaces of the ids derived from a message body (uuid.NewSHA1): a
// message without an id of its own, and the dead letter of a message.
var (
	messageSpace    = uuid.MustParse("4f1c2b8e-6a59-4c71-9a43-0d7f5a2e9b10")
	deadLetterSpace = uuid.MustParse("b7e3d0a4-2c6f-4e8b-8f15-63a9c1d2e7f4")
)

// Headers the runtime carries across the delay tiers.
const (
	// handBacksHeader counts the hand-backs of a message before its last
	// trip through a delay tier.
	handBacksHeader = "x-dubflow-hand-backs"
	// heldSinceHeader is when (Unix milliseconds) a message was first found
	// held by another attempt.
	heldSinceHeader = "x-dubflow-held-since"
)

// handBacks counts the times a message was handed back: those carried
// across delay tiers plus the broker's x-delivery-count of this trip.
func handBacks(h amqp.Table) int {
	return headerInt(h, handBacksHeader) + headerInt(h, "x-delivery-count")
}

// heldSince returns when a message was first found held, if it was.
func heldSince(h amqp.Table) (time.Time, bool) {
	ms := headerInt(h, heldSinceHeader)
	return time.UnixMilli(int64(ms)), ms > 0
}

// ReadyAt is when the message of a delivery with headers h and envelope
// env was ready in its work queue, the start of its queue wait: the
// publisher's wire.ReadyAtHeader (publish time, plus a delay tier's delay
// for a message that went through one: that wait is not queue wait); for
// a first attempt without it (an outside publisher's message), the
// envelope's created_at; else the zero time, not known.
func ReadyAt(h amqp.Table, env *wire.Envelope) time.Time {
	if ms := headerInt64(h, wire.ReadyAtHeader); ms > 0 {
		return time.UnixMilli(ms)
	}
	if env != nil && env.Attempt == 1 {
		return env.CreatedAt
	}
	return time.Time{}
}

// headerInt64 reads an integer header as int64 (0 when absent or not an
// integer).
func headerInt64(h amqp.Table, key string) int64 {
	if v, ok := h[key].(int64); ok {
		return v
	}
	return int64(headerInt(h, key))
}

func headerInt(h amqp.Table, key string) int {
	switch v := h[key].(type) {
	case int64:
		return int(v)
	case int32:
		return int(v)
	case int16:
		return int(v)
	case int8:
		return int(v)
	case int:
		return v
	case uint8:
		return int(v)
	case uint16:
		return int(v)
	case uint32:
		return int(v)
	}
	return 0
}
