//go:build !linux

package speech

// onNicedThread runs f at the worker's own priority: outside Linux,
// setpriority names processes, not threads.
func onNicedThread(_ int, f func()) { f() }
