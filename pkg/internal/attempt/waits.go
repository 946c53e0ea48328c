package attempt

import (
	"context"
	"fmt"
)

// waitsSQL counts the part's attempts before $4 that ended waiting for an
// engine (wait_until set), since the start of its current retry budget (the
// latest replay at or before $4: a replay starts the count again).
const waitsSQL = `SELECT count(*) FROM task_steps s
	WHERE s.task_id = $1 AND s.step = $2 AND s.part = $3 AND s.attempt < $4 AND s.wait_until IS NOT NULL
	  AND s.attempt >= (SELECT coalesce(max(r.base_attempt), 1) FROM step_replays r
	                     WHERE r.task_id = $1 AND r.step = $2 AND r.part = $3 AND r.base_attempt <= $4)`

// Waits counts the engine waits the part of k had before attempt k in its
// current retry budget: seed 003's pending-queue retry_count.
func Waits(ctx context.Context, q Reader, k Key) (int, error) {
	var n int
	if err := q.QueryRow(ctx, waitsSQL, k.TaskID, k.Step, k.Part, k.Attempt).Scan(&n); err != nil {
		return 0, fmt.Errorf("count waits of %s/%s part %q: %w", k.TaskID, k.Step, k.Part, err)
	}
	return n, nil
}
