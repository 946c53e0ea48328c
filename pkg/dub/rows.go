package dub

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ReadSegments runs query, which reads rows of one task's segments ($1 is
// the task's id, args the further parameters), and scans each row with
// scan, in the query's order. Every step that reads segment rows goes
// through it, so that the failure reads the same everywhere: "read
// segments of <task>: ...".
func ReadSegments[T any](ctx context.Context, db Querier, taskID uuid.UUID, scan pgx.RowToFunc[T],
	query string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, query, append([]any{taskID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", taskID, err)
	}
	return out, nil
}
