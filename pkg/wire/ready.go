package wire

import (
	"strconv"
	"strings"
	"time"
)

// ReadyAtHeader is the AMQP header that says when a message is ready in
// its work queue, in Unix milliseconds: when it was published, or, for a
// message published to a delay tier, that moment plus the tier's delay
// (the tier hands it back to its queue then). Consumers measure a
// message's queue wait from it (dubflow_step_wait_seconds); it is set by
// every publish of dubflow's own (outbox.Message.Publishing) and optional
// for other publishers.
const ReadyAtHeader = "x-dubflow-ready-at"

// DelayOf returns the delay of the delay tier named exchange
// (task.delay.<seconds>s, DelayQueue), and false for any other exchange.
func DelayOf(exchange string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(exchange, DelayPrefix)
	if !ok {
		return 0, false
	}
	secs, ok := strings.CutSuffix(rest, "s")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// ReadyAt is when a message published to exchange at publishedAt is ready
// in its work queue (the value of ReadyAtHeader).
func ReadyAt(exchange string, publishedAt time.Time) time.Time {
	if d, ok := DelayOf(exchange); ok {
		return publishedAt.Add(d)
	}
	return publishedAt
}
