package speech

import (
	"context"
	"os/exec"
	"syscall"
)

type niceKey struct{}

// Yielding returns ctx marked so that the recognisers and tools this
// package runs under it start nice (1..19; 0 leaves ctx as it is) steps
// nicer than the worker itself, at most 19: bulk work that gives way to
// interactive work on the same machine.
// At 5 a process gets about a third of the CPU time of one at 0 while
// both want it (CFS weights 335 and 1024); alone it runs at full speed.
// A decoder kept loaded in process (pocketsphinx_lib) decodes under a
// Yielding ctx on a thread of its own at that priority (Linux sets a
// niceness per thread; elsewhere it decodes at the worker's own).
func Yielding(ctx context.Context, nice int) context.Context {
	if nice <= 0 {
		return ctx
	}
	return context.WithValue(ctx, niceKey{}, min(nice, 19))
}

// niceOf is the niceness ctx was marked with by Yielding, 0 if none.
func niceOf(ctx context.Context) int {
	nice, _ := ctx.Value(niceKey{}).(int)
	return nice
}

// startYielding starts cmd and, under a Yielding ctx, lowers its priority:
// its niceness is the worker's own plus the context's (at most 19), so that
// a worker started at a niceness of its own (nice -n 19 on a shared
// machine) never raises its bulk work above its other work. The priority
// is set right after the program starts; a failure to set it leaves the
// program at the worker's own priority.
func startYielding(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	if nice := niceOf(ctx); nice > 0 {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, min(ownNice()+nice, 19))
	}
	return nil
}

// ownNice is the worker's own niceness (0 when it cannot be read). Linux's
// getpriority returns 20 minus the niceness.
func ownNice() int {
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - raw
}
