package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Counter is a count kept on a row (an agent's queue size, a staff member's
// load) next to the rows it counts, and the SQL that reads, counts and sets
// it.
type Counter struct {
	// Name and Of name the count and its owner in errors ("load", "staff").
	Name, Of string
	// Suspects selects the ids of the owners whose stored count may differ
	// from the rows.
	Suspects string
	// Stored reads the stored count of owner $1 and locks its row (FOR
	// UPDATE); Count counts its rows; Set stores $2 as its count.
	Stored, Count, Set string
}

// Repair sets the stored count to the number of rows for every owner where
// they differ and returns how many it changed. Each owner's row is locked
// before its rows are counted, so the count's snapshot includes every change
// committed before the lock and no new one can be made while it is held: a
// concurrent change is counted exactly once, and any number of processes may
// run it at once.
func (c Counter) Repair(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	rows, err := pool.Query(ctx, c.Suspects)
	if err != nil {
		return 0, fmt.Errorf("find each %s with a wrong %s: %w", c.Of, c.Name, err)
	}
	suspects, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return 0, fmt.Errorf("find each %s with a wrong %s: %w", c.Of, c.Name, err)
	}
	repaired := 0
	for _, id := range suspects {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var stored, counted int
			if err := tx.QueryRow(ctx, c.Stored, id).Scan(&stored); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, c.Count, id).Scan(&counted); err != nil {
				return err
			}
			if stored == counted {
				return nil
			}
			repaired++
			_, err := tx.Exec(ctx, c.Set, id, counted)
			return err
		})
		if err != nil {
			return repaired, fmt.Errorf("repair %s of %s %s: %w", c.Name, c.Of, id, err)
		}
	}
	return repaired, nil
}
