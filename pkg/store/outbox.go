package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// OutboxByRoutingKey counts the outbox rows per routing key among keys:
// messages committed and not published yet (a retry's row carries its
// work routing key too, with a delay tier's exchange).
func OutboxByRoutingKey(ctx context.Context, q Querier, keys []string) (map[string]int, error) {
	rows, err := q.Query(ctx, `SELECT routing_key, count(*) FROM outbox WHERE routing_key = ANY($1::text[]) GROUP BY routing_key`, keys)
	if err != nil {
		return nil, fmt.Errorf("count outbox rows: %w", err)
	}
	counts := map[string]int{}
	var key string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error {
		counts[key] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count outbox rows: %w", err)
	}
	return counts, nil
}
