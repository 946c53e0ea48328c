package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
)

// reapAllSQL is reapSQL for every step at once ($1 now): the expired
// reservations and leases of dead replicas are deleted and their slots
// freed; their units are not refunded (they may have been spent). It
// returns how many it deleted.
const reapAllSQL = `WITH gone AS (DELETE FROM engine_reservations WHERE expires_at < $1 RETURNING step, name, slots),
	freed AS (UPDATE engine_schedule e SET in_flight = greatest(e.in_flight - g.n, 0)
	  FROM (SELECT step, name, sum(slots) AS n FROM gone GROUP BY step, name) g
	 WHERE e.step = g.step AND e.name = g.name RETURNING 1)
	SELECT count(*) FROM gone`

// ReapExpired deletes the engine reservations of every step that expired
// before now (their replicas died) and frees their slots, as each batch
// does for its own step (seed 003's cleanup of expired service
// reservations); it returns how many it deleted.
func ReapExpired(ctx context.Context, db store.Querier, now time.Time) (int, error) {
	var n int
	if err := db.QueryRow(ctx, reapAllSQL, now).Scan(&n); err != nil {
		return 0, fmt.Errorf("reap expired engine reservations: %w", err)
	}
	return n, nil
}
