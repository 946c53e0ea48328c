package speech_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
)

// fakeTranslator upper-cases texts and records the batches it was sent.
// fail decides, per call, whether it fails and how.
type fakeTranslator struct {
	mu    sync.Mutex
	calls [][]string
	fail  func(texts []string, call int) ([]string, error)
}

func (f *fakeTranslator) Translate(_ context.Context, texts []string, _, _ string) ([]string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, append([]string(nil), texts...))
	n := len(f.calls)
	f.mu.Unlock()
	if f.fail != nil {
		if out, err := f.fail(texts, n); out != nil || err != nil {
			return out, err
		}
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = strings.ToUpper(t)
	}
	return out, nil
}

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("line %d", i)
	}
	return out
}

func TestBatcherBatches(t *testing.T) {
	f := &fakeTranslator{}
	b := &speech.Batcher{Engine: f, BatchSize: 4}
	got, err := b.Translate(context.Background(), numbered(10), "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if g != fmt.Sprintf("LINE %d", i) {
			t.Errorf("line %d: %q", i, g)
		}
	}
	if len(f.calls) != 3 || len(f.calls[0]) != 4 || len(f.calls[2]) != 2 {
		t.Errorf("calls %q, want batches of 4, 4, 2", f.calls)
	}
}

func TestBatcherFallsBackToItems(t *testing.T) {
	// Batches fail; "line 3" fails its first single try only.
	var tries3 int
	f := &fakeTranslator{fail: func(texts []string, _ int) ([]string, error) {
		if len(texts) > 1 {
			return nil, errors.New("http 500: boom")
		}
		if texts[0] == "line 3" {
			tries3++
			if tries3 == 1 {
				return nil, errors.New("http 503")
			}
		}
		return nil, nil
	}}
	b := &speech.Batcher{Engine: f, BatchSize: 5, ItemMaxRetries: 2}
	got, err := b.Translate(context.Background(), numbered(5), "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	if got[3] != "LINE 3" || len(got) != 5 {
		t.Errorf("got %q", got)
	}
	if len(f.calls) != 1+5+1 {
		t.Errorf("%d calls, want 1 batch, 5 items and 1 retry", len(f.calls))
	}
}

func TestBatcherCountMismatchIsBatchFailure(t *testing.T) {
	f := &fakeTranslator{fail: func(texts []string, _ int) ([]string, error) {
		if len(texts) > 1 {
			return []string{"only one"}, nil // no error, wrong count
		}
		return nil, nil
	}}
	got, err := (&speech.Batcher{Engine: f, BatchSize: 3}).Translate(context.Background(), numbered(3), "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "LINE 0,LINE 1,LINE 2" {
		t.Errorf("got %q", got)
	}
}

func TestBatcherItemExhaustedKeepsClass(t *testing.T) {
	perm := fault.Permanent(errors.New("http 400: sensitive content"))
	f := &fakeTranslator{fail: func(texts []string, _ int) ([]string, error) {
		for _, t := range texts {
			if t == "line 1" {
				return nil, perm
			}
		}
		return nil, nil
	}}
	_, err := (&speech.Batcher{Engine: f, BatchSize: 3, ItemMaxRetries: 3}).Translate(context.Background(), numbered(3), "en", "es")
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "text 1") {
		t.Fatalf("want a permanent error naming text 1, got %v", err)
	}
	if len(f.calls) != 1+2 { // batch, line 0, line 1 once (permanent: no retry)
		t.Errorf("%d calls: %q", len(f.calls), f.calls)
	}

	transient := errors.New("http 502")
	f = &fakeTranslator{fail: func([]string, int) ([]string, error) { return nil, transient }}
	_, err = (&speech.Batcher{Engine: f, BatchSize: 2, ItemMaxRetries: 3}).Translate(context.Background(), numbered(2), "en", "es")
	if !errors.Is(err, transient) || fault.IsPermanent(err) {
		t.Fatalf("want the transient error, got %v", err)
	}
	if len(f.calls) != 1+3 {
		t.Errorf("%d calls, want 1 batch + 3 tries of the first text", len(f.calls))
	}
}

func TestBatcherStopsOnRateLimit(t *testing.T) {
	f := &fakeTranslator{fail: func([]string, int) ([]string, error) {
		return nil, fault.RetryAfter(errors.New("http 429"), 30*time.Second)
	}}
	_, err := (&speech.Batcher{Engine: f, BatchSize: 5}).Translate(context.Background(), numbered(5), "en", "es")
	if d, ok := fault.RetryAfterHint(err); !ok || d != 30*time.Second {
		t.Fatalf("want the RetryAfter hint, got %v", err)
	}
	if len(f.calls) != 1 {
		t.Errorf("%d calls, want no fallback after a 429", len(f.calls))
	}
}

func TestBatcherSplitsLongText(t *testing.T) {
	f := &fakeTranslator{}
	long := "First sentence here. Second one is a bit longer! Third? " + strings.Repeat("word ", 30)
	b := &speech.Batcher{Engine: f, BatchSize: 50, MaxTextLength: 25}
	got, err := b.Translate(context.Background(), []string{"short", long, ""}, "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.calls {
		for _, piece := range c {
			if len([]rune(piece)) > 25 {
				t.Errorf("piece %q longer than 25", piece)
			}
		}
	}
	if want := strings.ToUpper(strings.Join(strings.Fields(long), " ")); got[1] != want {
		t.Errorf("joined %q\nwant   %q", got[1], want)
	}
	if got[0] != "SHORT" || got[2] != "" {
		t.Errorf("got %q", got)
	}
	if f.calls[0][1] != "First sentence here." {
		t.Errorf("first piece %q, want the first sentence", f.calls[0][1])
	}
}
