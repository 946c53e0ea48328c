// Command reconciler finds work that stopped moving and moves it on or ends
// it, safely from any number of replicas:
//
//   - messages lost on their way to a worker: a part of a queued or running
//     task waiting for a message with no activity for STUCK_TASK_SECONDS
//     (or held under a lease that ran out RECONCILE_LEASE_GRACE_SECONDS
//     ago) is re-driven only when RabbitMQ holds fewer messages for its step
//     than parts wait for one, on two passes in a row; a backlog is waiting,
//     not loss (see lostMessages);
//   - outbox rows nobody published: published with confirms;
//   - tasks nobody moves any more: a queued or running task without progress
//     for RECONCILE_TASK_MAX_IDLE_SECONDS, or compensating for
//     RECONCILE_COMPENSATING_MAX_SECONDS, ends failed with the reason and
//     event.task.failed;
//   - attempts of ended tasks whose lease ran out: closed.
//
// Every action is logged and counted (dubflow_reconciler_actions_total,
// dubflow_reconciler_redrives_total, dubflow_reconciler_skipped_waiting_total).
package main

import (
	"context"

	"github.com/dubflow/dubflow/pkg/service"
)

func main() {
	service.Main("reconciler", func(ctx context.Context, environ map[string]string) error {
		return run(ctx, environ, nil)
	})
}
