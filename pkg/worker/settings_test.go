package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

// TestARunningWorkerTakesASettingChange: the asr worker seeds
// step.max_engine_waits from STEP_MAX_WAITS on its first start; a change
// through setting.Set shows in its dubflow_setting within Poll (LISTEN
// brings it at once) and bounds the next part's waits, without a restart.
func TestARunningWorkerTakesASettingChange(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	route := step.Route{Step: wire.StepASR, Timeout: time.Minute,
		Handler: step.HandlerFunc(func(context.Context, *step.Message) error {
			calls.Add(1)
			return fault.Wait(errors.New("asr pool: no engine"), fault.WaitNoEngine, time.Now())
		})}
	run := func(ctx context.Context, environ map[string]string) error {
		var cfg config.Common
		p, err := service.Start(ctx, wire.StepASR, environ, &cfg, service.LogTo(io.Discard))
		if err != nil {
			return err
		}
		defer p.Close()
		return (&worker.Deps{Process: p}).Serve(ctx, wire.QueueASR, []step.Route{route})
	}
	s := testenv.NewStack(t, run, map[string]string{"STEP_MAX_WAITS": "4"})
	s.Start()
	ctx := context.Background()
	seeded, err := setting.Get(ctx, s.DB.Pool, setting.MaxEngineWaits)
	if err != nil || seeded.Value != "4" || seeded.UpdatedBy != "asr (STEP_MAX_WAITS)" {
		t.Fatalf("seeded %+v (%v), want 4 from asr's STEP_MAX_WAITS", seeded, err)
	}
	metric := func() string { return settingMetric(s.Env["OPS_ADDR"], setting.MaxEngineWaits) }
	if got := metric(); got != "4" {
		t.Fatalf("dubflow_setting{key=%q} = %q, want 4", setting.MaxEngineWaits, got)
	}

	if _, err := setting.Set(ctx, s.DB.Pool, setting.MaxEngineWaits, "1", "operator"); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, setting.Poll+time.Second, "the worker to take the change", func() bool { return metric() == "1" })

	env := asrMessage(t)
	s.Publish(env)
	body := s.Next(wire.QueueDLQ, 30*time.Second)
	dl, err := wire.DecodeDeadLetter(body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dl.FailureReason, "after 1 waits") || calls.Load() != 2 {
		t.Errorf("dead letter %q after %d calls, want the second wait to end it (after 1 waits)", dl.FailureReason, calls.Load())
	}
}

// settingMetric reads dubflow_setting{key} from the ops endpoint at addr
// ("" when it does not answer it).
func settingMetric(addr, key string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := fmt.Sprintf("dubflow_setting{key=%q} ", key)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return ""
}
