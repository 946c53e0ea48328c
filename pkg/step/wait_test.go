package step_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestQueueWaitIsMeasuredFromReadyToClaim: a message that was ready in its
// queue 3 s before the runner claimed it (its x-dubflow-ready-at header)
// is counted in dubflow_step_wait_seconds{step, project} as a wait of
// about 3 s and recorded on its attempt (queue_wait_ms); its retry, which
// spent 4 s in a delay tier, is counted with the short wait it had after
// the tier handed it back, not the tier's 4 s.
func TestQueueWaitIsMeasuredFromReadyToClaim(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var calls callLog
	var failed atomic.Bool
	h, env := serveASR(t, route(recorded(&calls, func(*step.Message) error {
		if !failed.Swap(true) {
			return errFlaky
		}
		return nil
	})), withMetrics(reg), func(c *step.Config) {
		c.Backoff = func(int) time.Duration { return 4 * time.Second }
	})
	ctx := context.Background()
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, project) VALUES ($1, 'queued', 'acme')`, env.TaskID); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	m := outbox.New(wire.Exchange, wire.RoutingKey(env.Step), body)
	pub := m.Publishing()
	pub.Headers[wire.ReadyAtHeader] = time.Now().Add(-3 * time.Second).UnixMilli()
	if err := h.pub.Publish(ctx, m.Exchange, m.RoutingKey, pub); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 40*time.Second, "the retry succeeded", func() bool {
		return h.stepRows(env.TaskID, "succeeded") == 1
	})
	rows, err := h.db.Pool.Query(ctx, `SELECT attempt, queue_wait_ms FROM task_steps WHERE task_id = $1 ORDER BY attempt`, env.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	waits := map[int]*int64{}
	for rows.Next() {
		var a int
		var w *int64
		if err := rows.Scan(&a, &w); err != nil {
			t.Fatal(err)
		}
		waits[a] = w
	}
	if w := waits[1]; w == nil || *w < 3000 || *w > 13000 {
		t.Errorf("attempt 1 queue_wait_ms = %v, want about 3000 (ready 3 s before the claim)", deref(w))
	}
	if w := waits[2]; w == nil || *w >= 3000 {
		t.Errorf("attempt 2 queue_wait_ms = %v, want below the delay tier's 4 s: the tier's wait is not queue wait", deref(w))
	}
	h1 := waitHistogram(t, reg, "asr", "acme")
	if h1 == nil || h1.GetSampleCount() != 2 {
		t.Fatalf("dubflow_step_wait_seconds{step=asr,project=acme} = %v, want 2 observations", h1)
	}
	if sum := h1.GetSampleSum(); sum < 3 || sum > 16 {
		t.Errorf("sum of the waits = %.3f s, want about 3", sum)
	}
}

// TestWaitProjectLabelsAreBounded: past the first WaitProjectLabels
// projects the label is "other", and a task without a project is "none".
func TestWaitProjectLabelsAreBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := step.NewMetrics(reg)
	for i := range step.WaitProjectLabels + 5 {
		step.ObserveWait(m, "tts", "p"+string(rune('a'+i)), 0.5)
	}
	step.ObserveWait(m, "tts", "", 0.5)
	if got := waitHistogram(t, reg, "tts", "other"); got == nil || got.GetSampleCount() != 5 {
		t.Errorf("other = %v, want the 5 projects past the first %d", got, step.WaitProjectLabels)
	}
	if got := waitHistogram(t, reg, "tts", "none"); got == nil || got.GetSampleCount() != 1 {
		t.Errorf("none = %v, want the task without a project", got)
	}
	if got := waitHistogram(t, reg, "tts", "pa"); got == nil || got.GetSampleCount() != 1 {
		t.Errorf("pa = %v, want the first project under its own name", got)
	}
}

func deref(p *int64) any {
	if p == nil {
		return "NULL"
	}
	return *p
}

// waitHistogram reads dubflow_step_wait_seconds{step, project} from reg.
func waitHistogram(t *testing.T, reg *prometheus.Registry, stepName, project string) *dto.Histogram {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "dubflow_step_wait_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["step"] == stepName && labels["project"] == project {
				return m.GetHistogram()
			}
		}
	}
	return nil
}
