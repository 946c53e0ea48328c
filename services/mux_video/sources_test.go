package main

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/google/uuid"
)

// TestSourcesKeepOneDownloadPerTask: a task's source is fetched once and
// kept between runs; another key fetches anew; a run that does not keep it
// (its stream ended, a batch failed) removes it; a failed fetch keeps
// nothing; unused sources go after sourceIdle and beyond maxSources or
// maxBytes, the longest unused first.
func TestSourcesKeepOneDownloadPerTask(t *testing.T) {
	ctx := context.Background()
	var c sources
	fetches := 0
	fetch := func(context.Context, string) (*source, error) { fetches++; return &source{}, nil }
	mkdir := func() (string, error) { return os.MkdirTemp(t.TempDir(), "src-") }
	task := uuid.New()
	use := func(key string, keep bool) *source {
		t.Helper()
		s, release, err := c.get(ctx, task, key, mkdir, fetch)
		if err != nil {
			t.Fatal(err)
		}
		release(keep)
		return s
	}
	first := use("inputs/a.mp4", true)
	if again := use("inputs/a.mp4", true); again != first || fetches != 1 {
		t.Fatalf("fetched %d times, want the kept source once", fetches)
	}
	other := use("inputs/b.mp4", false)
	if fetches != 2 {
		t.Fatalf("another key: fetched %d times, want 2", fetches)
	}
	if _, err := os.Stat(other.dir); !errors.Is(err, os.ErrNotExist) || len(c.byTask) != 0 {
		t.Fatalf("a source not kept: its folder %v, %d kept", err, len(c.byTask))
	}
	bad := func(context.Context, string) (*source, error) { return nil, errors.New("no such object") }
	if _, _, err := c.get(ctx, task, "inputs/c.mp4", mkdir, bad); err == nil || len(c.byTask) != 0 {
		t.Fatalf("a failed fetch: %v, %d kept", err, len(c.byTask))
	}
	for range maxSources + 2 {
		s, release, err := c.get(ctx, uuid.New(), "inputs/x.mp4", mkdir, fetch)
		if err != nil {
			t.Fatal(err)
		}
		release(true)
		s.used = s.used.Add(-time.Minute) // older than the next one
	}
	if len(c.byTask) != maxSources {
		t.Fatalf("%d kept, want %d", len(c.byTask), maxSources)
	}
	c.mu.Lock()
	c.sweepLocked(time.Now().Add(sourceIdle + time.Minute))
	c.mu.Unlock()
	if len(c.byTask) != 0 {
		t.Fatalf("%d kept after %v unused, want none", len(c.byTask), sourceIdle)
	}
	c.maxBytes = 10
	sized := func(context.Context, string) (*source, error) { return &source{info: &media.Info{Size: 6}}, nil }
	a, b := uuid.New(), uuid.New()
	for _, id := range []uuid.UUID{a, b} {
		_, release, err := c.get(ctx, id, "inputs/s.mp4", mkdir, sized)
		if err != nil {
			t.Fatal(err)
		}
		release(true)
	}
	if _, ok := c.byTask[a]; ok || len(c.byTask) != 1 {
		t.Fatalf("two sources of 6 bytes under a bound of 10: %d kept (the first: %v), want the second alone", len(c.byTask), ok)
	}
}
