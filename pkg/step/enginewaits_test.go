package step_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestEngineWaitsAreBounded: a part whose step keeps finding no engine
// waits without spending its retries, but only MaxWaits times in a budget
// (read at each wait); the next wait ends it dead-lettered, transient,
// with the reason and the count. A retry between the waits spends a retry
// and not a wait.
func TestEngineWaitsAreBounded(t *testing.T) {
	t.Parallel()
	var calls callLog
	var bound atomic.Int64
	bound.Store(3)
	h := setup(t)
	h.run(wire.QueueASR, route(recorded(&calls, func(m *step.Message) error {
		if m.Envelope.Attempt == 1 {
			return fmt.Errorf("call asr engine: %w", errFlaky)
		}
		return fault.Wait(fmt.Errorf("asr pool: no engine can serve"), fault.WaitRateLimit, time.Now())
	})), func(c *step.Config) { c.MaxWaits = func() int { return int(bound.Load()) } })
	env := asrEnvelope(t)
	h.publish(env)
	dl := h.deadLetter(60 * time.Second)
	got := calls.snapshot()
	if len(got) != 5 {
		t.Fatalf("handler calls = %d, want 5 (a retried failure, 3 waits, the wait past the bound)", len(got))
	}
	want := "no engine could serve the step after 3 waits (the last rate_limit until "
	if dl.Attempt != 5 || dl.ErrorClass != wire.ClassTransient || !strings.Contains(dl.FailureReason, want) ||
		!strings.Contains(dl.FailureReason, "asr pool: no engine can serve") {
		t.Errorf("dead letter attempt %d class %q reason %q, want attempt 5, transient, %q", dl.Attempt, dl.ErrorClass,
			dl.FailureReason, want)
	}
	if dl.RetryCount != 1 {
		t.Errorf("retry_count %d, want 1 (the waits spent no retry)", dl.RetryCount)
	}
	var waited int
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps WHERE task_id = $1 AND wait_until IS NOT NULL`,
		env.TaskID).Scan(&waited); err != nil || waited != 3 {
		t.Errorf("attempts recorded waiting = %d (%v), want 3", waited, err)
	}
}
