package main

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/google/uuid"
)

// sources keeps, for the tasks whose stream this process makes, the
// source video downloaded and checked once, with its probe and its
// stream's video plan: each batch of a two-hour film would otherwise
// download, hash and read the whole film again.
//
// One run makes a task's stream at a time in a process (flights), so a
// kept source has one user at a time. A source is dropped when its stream
// ends, when a batch fails (the next run fetches it again), after
// sourceIdle unused, and, beyond maxSources kept or maxBytes on the
// scratch disk, the longest unused first.
type sources struct {
	// maxBytes bounds the bytes kept (0: no bound); mux_video keeps at
	// most one video of MAX_VIDEO_BYTES more on its scratch disk than
	// its runs need.
	maxBytes int64
	mu       sync.Mutex
	byTask   map[uuid.UUID]*source
}

// source is one task's kept source video.
type source struct {
	key   string // the object it was downloaded from
	dir   string // its scratch folder, removed with it
	path  string
	info  *media.Info
	video media.StreamVideo
	size  int64
	used  time.Time
	busy  bool
}

const (
	// sourceIdle is how long a source is kept unused: a task's stream
	// messages come every few seconds while it is dubbed.
	sourceIdle = 10 * time.Minute
	// maxSources bounds the sources kept (each up to MAX_VIDEO_BYTES on
	// the scratch disk).
	maxSources = 4
)

// fetchSource downloads and checks a task's source into dir.
type fetchSource func(ctx context.Context, dir string) (*source, error)

// get returns task's kept source of key, or fetches it (into a new scratch
// folder made by mkdir). release must be called when the run is done with
// it; keep false drops it.
func (c *sources) get(ctx context.Context, task uuid.UUID, key string, mkdir func() (string, error), fetch fetchSource) (*source, func(keep bool), error) {
	c.mu.Lock()
	c.sweepLocked(time.Now())
	s := c.byTask[task]
	if s != nil && (s.key != key || s.busy) {
		s = nil // another source (a re-submitted task) or a run elsewhere: fetch anew
	}
	if s != nil {
		s.busy = true
	}
	c.mu.Unlock()
	if s != nil {
		// A sibling's start-up sweep removes scratch folders by age.
		now := time.Now()
		_ = os.Chtimes(s.dir, now, now)
		return s, c.releaser(task, s), nil
	}
	dir, err := mkdir()
	if err != nil {
		return nil, nil, err
	}
	s, err = fetch(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	s.key, s.dir, s.busy = key, dir, true
	if s.info != nil {
		s.size = s.info.Size
	}
	c.mu.Lock()
	if c.byTask == nil {
		c.byTask = map[uuid.UUID]*source{}
	}
	if old := c.byTask[task]; old != nil && !old.busy {
		os.RemoveAll(old.dir)
	}
	c.byTask[task] = s
	c.mu.Unlock()
	return s, c.releaser(task, s), nil
}

// releaser ends a run's use of s.
func (c *sources) releaser(task uuid.UUID, s *source) func(keep bool) {
	return func(keep bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		s.busy, s.used = false, time.Now()
		if !keep || c.byTask[task] != s {
			if c.byTask[task] == s {
				delete(c.byTask, task)
			}
			os.RemoveAll(s.dir)
			return
		}
		c.sweepLocked(s.used)
	}
}

// sweepLocked drops the sources unused for sourceIdle, then the longest
// unused ones beyond maxSources or maxBytes. c.mu is held.
func (c *sources) sweepLocked(now time.Time) {
	var bytes int64
	for task, s := range c.byTask {
		if !s.busy && now.Sub(s.used) > sourceIdle {
			delete(c.byTask, task)
			os.RemoveAll(s.dir)
			continue
		}
		bytes += s.size
	}
	for len(c.byTask) > maxSources || (c.maxBytes > 0 && bytes > c.maxBytes) {
		var oldest uuid.UUID
		var at time.Time
		for task, s := range c.byTask {
			if !s.busy && (at.IsZero() || s.used.Before(at)) {
				oldest, at = task, s.used
			}
		}
		if at.IsZero() {
			return // every one is in use
		}
		bytes -= c.byTask[oldest].size
		os.RemoveAll(c.byTask[oldest].dir)
		delete(c.byTask, oldest)
	}
}
