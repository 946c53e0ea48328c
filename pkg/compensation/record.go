package compensation

import (
	"context"
	"fmt"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
)

// Record records one task.tts_compensation message, named by messageID,
// against its segment (tts_compensations, which Requeue marks requeued). A
// message recorded before changes nothing; Record reports whether it was
// new. The dead-letter recorder consumes the compensation queue through it.
func Record(ctx context.Context, q store.Querier, messageID string, c *wire.Compensation) (bool, error) {
	tag, err := q.Exec(ctx, `INSERT INTO tts_compensations
		(message_id, task_id, segment_idx, error, trace_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (message_id) DO NOTHING`,
		messageID, c.TaskID, c.SegmentIdx, c.Error, c.TraceID, c.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("record compensation of %s segment %d: %w", c.TaskID, c.SegmentIdx, err)
	}
	return tag.RowsAffected() == 1, nil
}
