package speech_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// pipeTexts are texts whose translation exercises the deformatter: markup
// characters Apertium escapes, sentence ends, unknown words, accents.
var pipeTexts = []string{
	"The house is big.",
	"I like the meeting, and the dog runs in the park!",
	"Mr. Smith went to Washington. He said hi",
	"A [b] c\\d ^e$ f/g @h *i <j> {k} #l ~m +n | o",
	"Quizzically, the xylophonist zorbed.",
	"It's 5 o'clock; \"yes\" — she said?",
	"",
	"Where is the station?",
}

// TestApertiumPipelineMatchesScript: the long-lived pipelines translate
// every text exactly as `apertium -u` run once per call does, call after
// call on the same pipeline, and a call cancelled half-way leaves the next
// call a working pipeline.
func TestApertiumPipelineMatchesScript(t *testing.T) {
	needTool(t, "apertium")
	ctx := context.Background()
	want, err := (&speech.Apertium{Pipelines: -1}).Translate(ctx, pipeTexts, "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	a := &speech.Apertium{Pipelines: 1}
	t.Cleanup(func() { _ = a.Close() })
	for round := range 3 {
		got, err := a.Translate(ctx, pipeTexts, "en", "es")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("round %d, text %d: pipeline %q, script %q", round, i, got[i], want[i])
			}
		}
		one, err := a.Translate(ctx, pipeTexts[2:3], "en", "es")
		if err != nil || one[0] != want[2] {
			t.Fatalf("round %d, alone: %q, %v; want %q", round, one, err, want[2])
		}
	}
	if got := a.Started(); got != 1 {
		t.Errorf("%d pipelines started for sequential calls, want 1 (kept running)", got)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Translate(cctx, pipeTexts, "en", "es"); err == nil {
		t.Fatal("cancelled call succeeded")
	}
	// A call whose time runs out while its text is in the pipeline (or
	// before: either way the next call must work).
	long := make([]string, 400)
	for i := range long {
		long[i] = pipeTexts[i%len(pipeTexts)]
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, _ = a.Translate(tctx, long, "en", "es")
	cancel()
	got, err := a.Translate(ctx, pipeTexts, "en", "es")
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a cancelled call: %q, %v", got, err)
	}

	// Both directions of a pair are pipelines of their own.
	back, err := a.Translate(ctx, []string{"Tengo un perro."}, "es", "en")
	if err != nil || back[0] == "" {
		t.Fatalf("spa-eng: %q, %v", back, err)
	}
}

// TestApertiumPipelineIdleStops: a pipeline unused for IdleTimeout stops;
// the next call starts another.
func TestApertiumPipelineIdleStops(t *testing.T) {
	needTool(t, "apertium")
	a := &speech.Apertium{IdleTimeout: 50 * time.Millisecond}
	t.Cleanup(func() { _ = a.Close() })
	if _, err := a.Translate(context.Background(), pipeTexts[:1], "en", "es"); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 30*time.Second, "the idle pipeline to stop", func() bool { return a.Running() == 0 })
	if _, err := a.Translate(context.Background(), pipeTexts[:1], "en", "es"); err != nil {
		t.Fatal(err)
	}
	if got := a.Started(); got != 2 {
		t.Errorf("%d pipelines started, want 2", got)
	}
}

// TestApertiumPipelineSharedByConcurrentCalls: calls at once beyond
// Pipelines wait for a pipeline instead of starting more, and each gets
// its own texts back.
func TestApertiumPipelineSharedByConcurrentCalls(t *testing.T) {
	needTool(t, "apertium")
	a := &speech.Apertium{}
	t.Cleanup(func() { _ = a.Close() })
	want, err := (&speech.Apertium{Pipelines: -1}).Translate(context.Background(), pipeTexts, "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			in := pipeTexts[i%len(pipeTexts):]
			got, err := a.Translate(context.Background(), in, "en", "es")
			if err == nil && fmt.Sprint(got) != fmt.Sprint(want[i%len(pipeTexts):]) {
				err = fmt.Errorf("got %q, want %q", got, want[i%len(pipeTexts):])
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if got := a.Started(); got != 1 {
		t.Errorf("%d pipelines started, want 1 (Pipelines defaults to 1)", got)
	}
}
