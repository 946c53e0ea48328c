package speech

import (
	"context"
	"os/exec"
	"syscall"
)

// YieldNice is the niceness of the tools run under a Yielding context:
// bulk work (a long video's chunks) that gives way to the short tasks and
// the other steps sharing the machine's cores, and takes whatever CPU
// they leave. At 5 a process gets about a third of the CPU time of one
// at 0 while both want it (CFS weights 335 and 1024): two yielding
// decoders weigh less than one short task's, so on two cores the short
// task keeps a core to itself; alone, a yielding process runs at full
// speed.
const YieldNice = 5

type yieldKey struct{}

// Yielding returns ctx marked so that the recognisers and tools this
// package runs under it start at YieldNice: the work is bulk and should
// give way to interactive work on the same machine. (A decoder kept
// loaded in process, built with pocketsphinx_lib, is not reniced.)
func Yielding(ctx context.Context) context.Context {
	return context.WithValue(ctx, yieldKey{}, true)
}

// yielding reports whether ctx is marked by Yielding.
func yielding(ctx context.Context) bool {
	y, _ := ctx.Value(yieldKey{}).(bool)
	return y
}

// startYielding starts cmd and, under a Yielding ctx, lowers its priority
// to YieldNice. The priority is set right after the program starts; a
// failure to set it leaves the program at the worker's own priority.
func startYielding(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	if yielding(ctx) {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, YieldNice)
	}
	return nil
}
