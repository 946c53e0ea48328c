package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// errReplaced is what run returns after a stalled decode: the worker
// stopped so that it is replaced (a non-zero exit: Kubernetes restarts
// the container).
var errReplaced = errors.New("a decode stalled in the recognizer; the worker stopped to be replaced")

// stallGuard takes a worker whose recogniser stalled out of service: a
// decoder loaded in process that stops making progress (speech.ErrStalled,
// ASR_STALL_SECONDS) is stuck where no context reaches it, and may have
// left the library's process-wide state behind it unusable. On the first
// stall the guard fails /readyz ("recognizer") and stops the worker as
// SIGTERM would: the consumers take no more messages, and the stalled
// step's message, which the runtime hands back without spending a retry
// (the error is marked Unavailable), and the other in-flight steps finish
// or are handed back within SHUTDOWN_GRACE_SECONDS. run then returns
// errReplaced, so that the process exits non-zero and is started anew,
// leaving the stuck decoder behind.
type stallGuard struct {
	stop context.CancelCauseFunc
	mu   sync.Mutex
	err  error // the first stall
}

// newStallGuard returns a guard that stops the worker by cancelling the
// context run serves under with stop.
func newStallGuard(stop context.CancelCauseFunc) *stallGuard {
	return &stallGuard{stop: stop}
}

// stalled records a stalled decode (speech.Pocketsphinx.OnStall) and stops
// the worker at the first.
func (g *stallGuard) stalled(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return
	}
	g.err = err
	g.stop(fmt.Errorf("%w: %w", errReplaced, err))
}

// ready is the worker's "recognizer" readiness check: failing from the
// first stall on.
func (g *stallGuard) ready(context.Context) error { return g.result() }

// result is errReplaced with the first stall, or nil when none happened.
func (g *stallGuard) result() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errReplaced, g.err)
}
