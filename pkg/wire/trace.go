package wire

import "context"

// traceKey is the context key of a message's trace id.
type traceKey struct{}

// WithTrace returns ctx carrying the trace id of the message being worked
// on (an envelope's trace_id), for what the work calls below the handler:
// the step runtime's Tracing middleware sets it, the engines' HTTP clients
// send it as X-Request-Id.
func WithTrace(ctx context.Context, traceID string) context.Context {
	if traceID == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traceID)
}

// TraceOf returns the trace id ctx carries (WithTrace), "" for none.
func TraceOf(ctx context.Context) string {
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}
