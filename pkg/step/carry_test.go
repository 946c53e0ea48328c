package step

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

// capture records the last publish.
type capture struct{ msg amqp.Publishing }

func (c *capture) Publish(_ context.Context, _, _ string, msg amqp.Publishing) error {
	c.msg = msg
	return nil
}

// TestLaterCarriesTheHandBackCount: a message republished through a delay
// tier starts with a fresh x-delivery-count, so the republished message
// carries the hand-backs so far, and since when it is held.
func TestLaterCarriesTheHandBackCount(t *testing.T) {
	t.Parallel()
	pub := &capture{}
	r := &Runner{cfg: Config{Publisher: pub, Delay: func(d time.Duration) (string, time.Duration) { return "delay", d }}}
	env := &wire.Envelope{TaskID: uuid.New(), Step: wire.StepASR, Attempt: 1}
	acked := false
	d := Delivery{Body: []byte(`{}`), Headers: amqp.Table{"x-delivery-count": int64(4), handBacksHeader: int64(3)},
		Ack: func() error { acked = true; return nil }}
	before := time.Now().Add(-time.Millisecond)
	r.later(context.Background(), d, env, time.Second, true, zerolog.Nop())
	if !acked {
		t.Fatal("not acked after the republish")
	}
	if n := headerInt(pub.msg.Headers, handBacksHeader); n != 7 {
		t.Errorf("carried hand-backs = %d, want 7", n)
	}
	since, ok := heldSince(pub.msg.Headers)
	if !ok || since.Before(before.Truncate(time.Millisecond)) || since.After(time.Now()) {
		t.Errorf("held since %v (%v), want now", since, ok)
	}
	// Held again: the first time stays.
	first := since
	d.Headers = pub.msg.Headers
	r.later(context.Background(), d, env, time.Second, true, zerolog.Nop())
	if again, _ := heldSince(pub.msg.Headers); !again.Equal(first) {
		t.Errorf("held since moved from %v to %v", first, again)
	}
	if n := handBacks(pub.msg.Headers); n != 7 {
		t.Errorf("hand-backs after a second hold = %d, want 7", n)
	}
}
