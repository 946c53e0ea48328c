package store_test

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
)

func TestMigrateIsIdempotentAndCreatesTables(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	// testenv already migrated once; a second run must change nothing.
	if err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	for _, table := range []string{"tasks", "task_steps", "step_parts", "segments", "outbox", "dead_letters"} {
		var n int
		if err := db.Pool.QueryRow(ctx,
			`SELECT count(*) FROM information_schema.tables WHERE table_name = $1`, table).Scan(&n); err != nil {
			t.Fatalf("query %s: %v", table, err)
		}
		if n != 1 {
			t.Errorf("table %s: found %d, want 1", table, n)
		}
	}
}
