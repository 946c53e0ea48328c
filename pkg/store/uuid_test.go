package store_test

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TestUUIDArgumentsMeanWhatTheyMeantBefore: a uuid.UUID argument gives the
// same values through the store's pool (16 bytes, registerUUID) as through a
// plain pgx connection (its text, driver.Valuer) — as a uuid, as text, in
// JSON, in an array, through a pointer, and NULL through a nil pointer.
func TestUUIDArgumentsMeanWhatTheyMeantBefore(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	plain, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	id := uuid.New()
	var none *uuid.UUID
	for _, c := range []struct {
		sql string
		arg any
	}{
		{`SELECT $1::uuid::text`, id},
		{`SELECT $1::text`, id},
		{`SELECT $1::varchar`, id},
		{`SELECT jsonb_build_object('id', $1::uuid)::text`, id},
		{`SELECT ($1::uuid[])::text`, []uuid.UUID{id, uuid.Nil}},
		{`SELECT $1::uuid::text`, &id},
		{`SELECT coalesce($1::uuid::text, 'null')`, none},
		{`SELECT (gen_random_uuid() = $1)::text`, id},
		{`SELECT ('` + id.String() + `'::uuid = $1)::text`, id},
	} {
		var viaPool, viaPlain string
		if err := db.Pool.QueryRow(ctx, c.sql, c.arg).Scan(&viaPool); err != nil {
			t.Errorf("%s through the pool: %v", c.sql, err)
			continue
		}
		if err := plain.QueryRow(ctx, c.sql, c.arg).Scan(&viaPlain); err != nil {
			t.Errorf("%s through a plain connection: %v", c.sql, err)
			continue
		}
		if viaPool != viaPlain {
			t.Errorf("%s: %q through the pool, %q through a plain connection", c.sql, viaPool, viaPlain)
		}
	}
	var back uuid.UUID
	if err := db.Pool.QueryRow(ctx, `SELECT $1::uuid`, id).Scan(&back); err != nil || back != id {
		t.Errorf("round trip: %v, %v; want %v", back, err, id)
	}
}
