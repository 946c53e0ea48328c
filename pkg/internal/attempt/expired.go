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

// QuietSQL is the SQL condition "no attempt of the task holds a live
// lease, waits for an engine, or started or finished within the
// interval": it made no progress that long. task and interval are SQL
// expressions.
func QuietSQL(task, interval string) string {
	return `NOT EXISTS (SELECT 1 FROM task_steps sa WHERE sa.task_id = ` + task + ` AND (
	    (sa.status = 'running' AND sa.lease_until > now()) OR sa.wait_until > now()
	    OR sa.started_at > now() - ` + interval + ` OR sa.finished_at > now() - ` + interval + `))`
}
