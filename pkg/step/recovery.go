package step

import (
	"context"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/store"
)

// CountExpiredAttempts counts the running attempts of live tasks whose
// lease ran out (attempt.CountExpired): in-flight work of workers that
// died, which the broker delivers again and the next claim takes over.
func CountExpiredAttempts(ctx context.Context, q store.Querier) (int, error) {
	return attempt.CountExpired(ctx, q)
}
