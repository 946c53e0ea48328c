package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dubflow/dubflow/migrations"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Migrate applies every pending migration embedded in the migrations module.
// It is safe to call from several processes at once: goose takes a Postgres
// advisory lock for the duration.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrateDB(ctx, db)
}

func migrateDB(ctx context.Context, db *sql.DB) error {
	// Out-of-order migrations are allowed: features are developed on
	// branches that land in any order, and a database migrated from one
	// branch must still take a lower-numbered file that lands later.
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(mustLocker()), goose.WithAllowOutofOrder(true))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

func mustLocker() lock.SessionLocker {
	l, err := lock.NewPostgresSessionLocker()
	if err != nil {
		// Only invalid options make the constructor fail; there are none.
		panic(fmt.Sprintf("goose session locker: %v", err))
	}
	return l
}
