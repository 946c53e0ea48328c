package step

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
)

// Middleware wraps a Handler with what every step's run shares, in
// net/http's shape (func(http.Handler) http.Handler; asynq's MiddlewareFunc,
// watermill's HandlerMiddleware): panic recovery (Recover), the trace
// (Tracing), logging (Logging) and metrics (Metrics.Middleware). The
// Runner wraps every route's handler in those, then in Config.Middleware;
// the runtime itself only decides and carries out what a run comes to.
type Middleware func(Handler) Handler

// Chain returns h wrapped in mw, the first outermost: Chain(h, a, b)
// handles a message with a, which calls b, which calls h.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Recover turns a panic of the handler (or of middleware inside it) into
// an error, logged with its stack: a failure of the step, retried as a
// transient one, never a crash of the worker.
func Recover() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) (err error) {
			defer func() {
				if p := recover(); p != nil {
					msg.Log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("handler panicked")
					err = panicError(p)
				}
			}()
			return next.Handle(ctx, msg)
		})
	}
}

// panicError is the error a handler's panic is recorded as: transient, so
// the step is retried.
func panicError(p any) error { return fmt.Errorf("handler panic: %v", p) }

// Tracing gives the handler's context the message's trace id
// (wire.WithTrace), so that what the handler calls carries it on: the
// engines' HTTP requests send it as X-Request-Id.
func Tracing() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) error {
			return next.Handle(wire.WithTrace(ctx, msg.Envelope.TraceID), msg)
		})
	}
}

// Logging logs the start of each run ("step started", with the part and
// the run's timeout) with the message's fields (task_id, step, attempt,
// trace_id), and gives the handler's context the message's logger
// (zerolog.Ctx). What the run comes to is the runtime's to log, with what
// it does about it (step succeeded, retry scheduled, ...).
func Logging() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) error {
			msg.Log.Info().Str("part", msg.Part).Dur("timeout", msg.Timeout).Msg("step started")
			return next.Handle(msg.Log.WithContext(ctx), msg)
		})
	}
}

// Middleware measures each run of the handler into
// dubflow_step_duration_seconds, by step and by the outcome the runtime
// records for the run (succeeded, retried, dead_lettered, parked, waited,
// refused: Message.OnOutcome); a run whose outcome is not recorded (its
// lease lost, handed back) is not measured.
func (m *Metrics) Middleware() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) error {
			start := time.Now()
			defer func() { // a panic too: Recover, outside, makes it a retry
				took := time.Since(start)
				msg.OnOutcome(func(outcome string) {
					m.duration.WithLabelValues(msg.Envelope.Step, outcome).Observe(took.Seconds())
				})
			}()
			return next.Handle(ctx, msg)
		})
	}
}
