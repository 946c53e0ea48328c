package speech

import (
	"runtime"
	"syscall"
)

// onNicedThread runs f on an OS thread of its own, nice steps nicer than
// the worker (at most 19), and ends that thread with f: on Linux a
// niceness belongs to a thread, and setpriority with a thread's id sets
// that thread's only. The goroutine that runs f holds its thread and
// never gives it back, so the runtime ends the thread with it rather than
// run other goroutines there at the lower priority; threads the runtime
// starts meanwhile come from its template thread, at the worker's
// priority. The main thread is never the one: the runtime would keep it,
// and the process's niceness (ps, top) is the main thread's. If the
// priority cannot be set, f runs at the worker's own.
func onNicedThread(nice int, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		tid := syscall.Gettid()
		if tid == syscall.Getpid() {
			// Held by this goroutine, the main thread cannot be the one
			// the next takes.
			onNicedThread(nice, f)
			runtime.UnlockOSThread()
			return
		}
		if raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid); err == nil {
			// Linux's getpriority returns 20 minus the niceness.
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, min(20-raw+nice, 19))
		}
		f()
	}()
	<-done
}
