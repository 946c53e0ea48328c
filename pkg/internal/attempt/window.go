package attempt

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file is the safety net of the fair fan-out (pkg/step's
// EmitWindowed and ReleaseWindow, which hold parts in held_parts and let
// them in through the SQL functions hold_part and release_held).

// StuckWindow is a task's step with parts held longer than the age asked.
type StuckWindow struct {
	TaskID uuid.UUID
	Step   string
	// Released are the outbox rows of the parts let in now.
	Released []int64
}

// ReleaseStuck lets in, for at most limit steps of queued or running
// tasks with a part held longer than age (as of now; nil is the database's
// clock), the held parts their windows have room for: the safety net for a
// release that never ran — a worker of an earlier release that does not
// release the parts a newer one held during a rolling upgrade (translate
// and tts parts are held since migration 00068), or a success recorded by
// hand. A window still full lets nothing in; each step's release runs
// under the window's lock, as pkg/step's ReleaseWindow's does. The caller publishes the
// returned outbox rows.
func ReleaseStuck(ctx context.Context, q store.Querier, age time.Duration, limit int, now *time.Time) ([]StuckWindow, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT h.task_id, h.step FROM held_parts h JOIN tasks t ON t.id = h.task_id
		WHERE t.status IN ('queued', 'running') AND h.created_at < coalesce($2::timestamptz, now()) - $1::interval
		LIMIT $3`, age, now, limit)
	if err != nil {
		return nil, fmt.Errorf("find held parts: %w", err)
	}
	stuck, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StuckWindow, error) {
		var w StuckWindow
		return w, r.Scan(&w.TaskID, &w.Step)
	})
	if err != nil {
		return nil, fmt.Errorf("find held parts: %w", err)
	}
	var out []StuckWindow
	for _, w := range stuck {
		rows, err := q.Query(ctx, `SELECT o_id FROM release_held($1, $2)`, w.TaskID, w.Step)
		if err != nil {
			return out, fmt.Errorf("release held %s parts of %s: %w", w.Step, w.TaskID, err)
		}
		if w.Released, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return out, fmt.Errorf("release held %s parts of %s: %w", w.Step, w.TaskID, err)
		}
		if len(w.Released) > 0 {
			out = append(out, w)
		}
	}
	return out, nil
}
