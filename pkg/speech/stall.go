package speech

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// DefaultStall is how long a decoder loaded in process may go without
// progress before its decode is given up (Pocketsphinx.Stall): far longer
// than a model's load (0.3 CPU-s), a block of 2048 samples (about 20 ms)
// or an utterance's end (under a second) take, even niced on a loaded
// machine.
const DefaultStall = time.Minute

// ErrStalled is wrapped, marked fault.Unavailable, by a decode that made
// no progress for its Stall: its decoder is stuck (in the C library, or on
// input that never comes) and is abandoned where it is. The worker is not
// at fault for the task but is not fit to decode any more: the runtime
// hands the message back without spending a retry, and the worker should
// be replaced (Pocketsphinx.OnStall).
var ErrStalled = errors.New("decode stalled")

// stallWatch tells a decode that moves from one that does not: the decode
// reports its progress (a decoder taken, samples consumed, an utterance
// ended) and wait gives up once stall passes without any.
type stallWatch struct {
	stall time.Duration
	start time.Time
	// last is when progress was last made, since start.
	last atomic.Int64
	// samples counts the samples the decoder consumed.
	samples atomic.Int64
	// stalled is set when wait gave up: the decode is abandoned.
	stalled atomic.Bool
}

// newStallWatch returns a watch that gives up after stall (DefaultStall
// when not positive) without progress, counted from now.
func newStallWatch(stall time.Duration) *stallWatch {
	if stall <= 0 {
		stall = DefaultStall
	}
	return &stallWatch{stall: stall, start: time.Now()}
}

// progress records that the decode moved on, consuming samples (0 for
// progress without any: a decoder taken, an utterance ended).
func (w *stallWatch) progress(samples int) {
	w.samples.Add(int64(samples))
	w.last.Store(int64(time.Since(w.start)))
}

// idle is how long the decode has gone without progress.
func (w *stallWatch) idle() time.Duration {
	return time.Since(w.start) - time.Duration(w.last.Load())
}

// decoded is what a decode came to.
type decoded struct {
	out string
	err error
}

// wait returns what done delivers, or ErrStalled (marked Unavailable) once
// the decode of what went stall without progress; the decode is then
// abandoned (abandoned reports it). When ctx ends first (the step stopped:
// its task was cancelled, its time ran out) wait returns ctx's error at
// once: the decode sees the same ctx at its next block of samples and ends
// by itself, but a niced decode thread on a busy machine may wait seconds
// for the CPU to get there, and the step's stop must not wait with it.
func (w *stallWatch) wait(ctx context.Context, done <-chan decoded, what string) (string, error) {
	t := time.NewTimer(w.stall)
	defer t.Stop()
	for {
		select {
		case r := <-done:
			return r.out, r.err
		case <-ctx.Done():
			return "", fmt.Errorf("%s: decode stopped: %w", what, ctx.Err())
		case <-t.C:
		}
		if idle := w.idle(); idle < w.stall {
			t.Reset(w.stall - idle)
			continue
		}
		w.stalled.Store(true)
		select {
		case r := <-done: // it ended as the watch gave up
			return r.out, r.err
		default:
		}
		return "", fault.Unavailable(fmt.Errorf("%s: %w: no progress for %s after %d samples; the decoder is abandoned",
			what, ErrStalled, w.stall, w.samples.Load()))
	}
}

// abandoned reports whether wait gave the decode up.
func (w *stallWatch) abandoned() bool { return w.stalled.Load() }
