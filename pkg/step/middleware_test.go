package step_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// message returns a message of step asr with a trace, logging to log.
func message(t *testing.T, log *bytes.Buffer) *step.Message {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	env, err := wire.New(wire.StepASR, id, "trace-mw", wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	if err != nil {
		t.Fatal(err)
	}
	return &step.Message{Envelope: env, Part: "p1", Timeout: 90 * time.Second,
		Log: zerolog.New(log).With().Str("task_id", env.TaskID.String()).Logger()}
}

// TestChainRunsTheFirstOutermost: Chain(h, a, b) runs a, then b, then h,
// and each sees what the one outside it gave its context.
func TestChainRunsTheFirstOutermost(t *testing.T) {
	t.Parallel()
	var order []string
	type key struct{}
	mark := func(name string) step.Middleware {
		return func(next step.Handler) step.Handler {
			return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
				prev, _ := ctx.Value(key{}).(string)
				order = append(order, name+"<"+prev)
				return next.Handle(context.WithValue(ctx, key{}, name), msg)
			})
		}
	}
	h := step.Chain(step.HandlerFunc(func(ctx context.Context, _ *step.Message) error {
		prev, _ := ctx.Value(key{}).(string)
		order = append(order, "h<"+prev)
		return nil
	}), mark("a"), mark("b"))
	if err := h.Handle(context.Background(), message(t, &bytes.Buffer{})); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, " "); got != "a< b<a h<b" {
		t.Fatalf("order %q, want a, then b, then the handler", got)
	}
}

// TestRecoverTurnsAPanicIntoARetryableError: a handler's panic is an error
// the runtime retries (not permanent), logged with its stack; a handler
// that returns is left alone.
func TestRecoverTurnsAPanicIntoARetryableError(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	msg := message(t, &log)
	err := step.Recover()(step.HandlerFunc(func(context.Context, *step.Message) error {
		panic("boom")
	})).Handle(context.Background(), msg)
	if err == nil || !strings.Contains(err.Error(), "handler panic: boom") || fault.IsPermanent(err) {
		t.Fatalf("a panicking handler: %v, want a retryable handler panic", err)
	}
	if !strings.Contains(log.String(), `"message":"handler panicked"`) || !strings.Contains(log.String(), "middleware_test.go") {
		t.Fatalf("log %s: want the panic with its stack", log.String())
	}
	want := errors.New("engine down")
	if err := step.Recover()(step.HandlerFunc(func(context.Context, *step.Message) error { return want })).
		Handle(context.Background(), msg); err != want {
		t.Fatalf("a returning handler: %v, want its own error", err)
	}
}

// TestTracingCarriesTheTraceID: the handler's context carries the
// message's trace id, which the engines' HTTP clients send on.
func TestTracingCarriesTheTraceID(t *testing.T) {
	t.Parallel()
	var got string
	err := step.Tracing()(step.HandlerFunc(func(ctx context.Context, _ *step.Message) error {
		got = wire.TraceOf(ctx)
		return nil
	})).Handle(context.Background(), message(t, &bytes.Buffer{}))
	if err != nil || got != "trace-mw" {
		t.Fatalf("trace in the handler's context %q (%v), want trace-mw", got, err)
	}
	if id := wire.TraceOf(context.Background()); id != "" {
		t.Fatalf("a context without a trace gives %q", id)
	}
}

// TestLoggingLogsTheStartWithTheMessagesFields: each run starts with "step
// started", the part and the timeout, in the message's logger, which the
// handler's context carries (zerolog.Ctx).
func TestLoggingLogsTheStartWithTheMessagesFields(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	msg := message(t, &log)
	err := step.Logging()(step.HandlerFunc(func(ctx context.Context, _ *step.Message) error {
		zerolog.Ctx(ctx).Info().Msg("inside")
		return nil
	})).Handle(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"message":"step started"`) || !strings.Contains(lines[0], `"part":"p1"`) ||
		!strings.Contains(lines[0], `"timeout":90000`) || !strings.Contains(lines[1], `"task_id":"`+msg.Envelope.TaskID.String()+`"`) ||
		!strings.Contains(lines[1], `"message":"inside"`) {
		t.Fatalf("log:\n%s\nwant step started with part and timeout, then the handler's line with the task", log.String())
	}
}

// TestMetricsMeasureARunByTheOutcomeRecorded: a run is measured into
// dubflow_step_duration_seconds under the outcome the runtime records for
// it, a panicking run too; a run whose outcome is not recorded is not.
func TestMetricsMeasureARunByTheOutcomeRecorded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := step.NewMetrics(reg)
	h := step.Chain(step.HandlerFunc(func(_ context.Context, msg *step.Message) error {
		if msg.Part == "panic" {
			panic("boom")
		}
		return nil
	}), step.Recover(), m.Middleware())
	runs := []struct{ part, outcome string }{{"p1", "succeeded"}, {"p2", "succeeded"}, {"panic", "retried"}, {"p3", ""}}
	for _, r := range runs {
		msg := message(t, &bytes.Buffer{})
		msg.Part = r.part
		_ = h.Handle(context.Background(), msg)
		if r.outcome != "" {
			step.Decided(msg, r.outcome)
		}
	}
	want := map[string]uint64{"succeeded": 2, "retried": 1}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "dubflow_step_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "outcome" {
					got[l.GetValue()] += s.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if len(got) != len(want) || got["succeeded"] != want["succeeded"] || got["retried"] != want["retried"] {
		t.Fatalf("runs measured by outcome %v, want %v", got, want)
	}
	if n := testutil.CollectAndCount(reg, "dubflow_step_messages_total"); n != 0 {
		t.Fatalf("the middleware counted %d messages; counting deliveries is the runtime's", n)
	}
}
