package attempt

import (
	"context"
	"fmt"
)

// CountExpired counts the running attempts of live tasks (queued, running,
// compensating) whose lease ran out: their workers died or stopped while
// they ran. The broker delivers their messages again (the claim takes an
// expired attempt over), and the reconciler re-drives the ones whose
// message was lost.
func CountExpired(ctx context.Context, q Reader) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM task_steps s JOIN tasks t ON t.id = s.task_id
		WHERE s.status = 'running' AND s.lease_until < now() AND t.status IN ('queued', 'running', 'compensating')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count expired attempts: %w", err)
	}
	return n, nil
}
