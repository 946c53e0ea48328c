package wire_test

import (
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
)

func TestStepOfQueue(t *testing.T) {
	for i, q := range wire.WorkQueues {
		if got := wire.StepOfQueue(q); got != wire.Pipeline[i] || wire.RoutingKey(got) != q {
			t.Errorf("StepOfQueue(%s) = %q, want %s", q, got, wire.Pipeline[i])
		}
	}
	for _, q := range []string{wire.QueueDLQ, wire.QueueTTSCompensation, wire.QueueWaiting, wire.DelayQueue(time.Second), "task.", "asr", ""} {
		if got := wire.StepOfQueue(q); got != "" {
			t.Errorf("StepOfQueue(%q) = %q, want none", q, got)
		}
	}
}

func TestDelayQueue(t *testing.T) {
	for tier, want := range map[time.Duration]string{time.Second: "task.delay.1s", 60 * time.Second: "task.delay.60s"} {
		if got := wire.DelayQueue(tier); got != want {
			t.Errorf("DelayQueue(%s) = %q, want %q", tier, got, want)
		}
	}
}
