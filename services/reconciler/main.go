// Command reconciler finds work that stopped moving and re-drives it,
// idempotently and safely from any number of replicas (each pass locks what
// it touches with FOR UPDATE SKIP LOCKED):
//
//   - steps whose lease expired with no worker left to finish them: the
//     attempt is closed and its message, kept in task_steps, replayed with a
//     fresh retry budget;
//   - outbox rows nobody published (a succeeded step whose next message
//     never left the outbox): published with confirms;
//   - tasks with no progress for STUCK_TASK_SECONDS: the first step that has
//     not succeeded is replayed from its last message (or one rebuilt from
//     the task row).
//
// Every action is logged and counted in dubflow_reconciler_actions_total.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dubflow/dubflow/pkg/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, config.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "reconciler:", err)
		os.Exit(1)
	}
}
