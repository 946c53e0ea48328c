package media

import "context"

// niceKey carries the niceness the tools a context runs get.
type niceKey struct{}

// Yielding returns a context whose ffmpeg and ffprobe runs get niceness
// nice (1..19): work that may wait, such as a growing stream's batches,
// yields the cores to the work a task waits for (asr's decodes, another
// task's final mux). The niceness is set on each tool's process right
// after it starts; the threads it starts then share it.
func Yielding(ctx context.Context, nice int) context.Context {
	return context.WithValue(ctx, niceKey{}, min(max(nice, 0), 19))
}

// niceOf is the niceness ctx asks for (0: the worker's own).
func niceOf(ctx context.Context) int {
	n, _ := ctx.Value(niceKey{}).(int)
	return n
}

// yield gives the started tool pid the niceness ctx asks for, if any; a
// failure only leaves the tool at the worker's priority.
func yield(ctx context.Context, pid int) {
	if n := niceOf(ctx); n > 0 && pid > 0 {
		_ = setNice(pid, n)
	}
}
