package step_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestDeadLetterNumbersAsSeed001Retries: seed 001 retries a transient
// failure 3 times and then dead-letters it, its example dead letter saying
// "attempt": 3. dubflow's dead letter counts as its envelope does (attempt
// from 1, proto/README.md "Dead letter"): the first try and 3 retries make
// attempt 4, the original message is that attempt 4's, and retry_count
// carries the seed's 3 — the retries spent.
func TestDeadLetterNumbersAsSeed001Retries(t *testing.T) {
	t.Parallel()
	var calls callLog
	h, env := serveASR(t, route(recorded(&calls, func(*step.Message) error {
		return fmt.Errorf("call asr engine: %w", errFlaky)
	})), func(c *step.Config) { c.Backoff = func(int) time.Duration { return time.Second } })
	h.publish(env)
	dl := h.deadLetter(40 * time.Second)
	if dl.Attempt != 4 || dl.RetryCount != 3 || dl.ErrorClass != "transient" {
		t.Errorf("dead letter attempt %d retry_count %d class %q, want 4 (the last attempt run), 3 (the seed's retries), transient",
			dl.Attempt, dl.RetryCount, dl.ErrorClass)
	}
	orig, err := dl.OriginalBody()
	if err != nil {
		t.Fatal(err)
	}
	oenv, err := wire.Decode(orig)
	if err != nil || oenv.Attempt != 4 {
		t.Errorf("original message attempt %v (%v), want 4: the message that failed last", oenv, err)
	}
	if n := calls.len(); n != 4 {
		t.Errorf("handler ran %d times, want 4: the first try and 3 retries", n)
	}
}
