package setting

import (
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
)

// Seeded is what seeding one setting found.
type Seeded struct {
	Key string
	// Inserted: this start gave the setting its first value, From (the
	// variable's name, or "default").
	Inserted bool
	From     string
	// Env is the variable's value in the service's environment ("":
	// unset); Stored is the value in force after seeding.
	Env, Stored string
}

// Differs reports whether the service's environment sets the variable to
// another value than the one in force: the stored value applies (the
// variable only gives the first value).
func (s Seeded) Differs() bool { return s.Env != "" && s.Env != s.Stored }

// seedSQL gives a setting its first value, or brings the stored row's
// definition up to date without touching its value; it returns whether it
// inserted the row (nothing when it changed nothing). Arguments as
// upsertSQL's.
const seedSQL = `INSERT INTO system_config AS c (key, value, category, description, value_type, constraints, updated_by)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (key) DO UPDATE SET category = EXCLUDED.category, description = EXCLUDED.description,
	    value_type = EXCLUDED.value_type, constraints = EXCLUDED.constraints
	WHERE (c.category, c.description, c.value_type, c.constraints) IS DISTINCT FROM
	      (EXCLUDED.category, EXCLUDED.description, EXCLUDED.value_type, EXCLUDED.constraints)
	RETURNING xmax = 0`

// Seed gives every setting service uses (Def.UsedBy) its first value
// unless it has one: the value of its variable in environ, else its
// default. A variable whose value the setting refuses is an error, on
// every start (the service must not run with it). The stored rows'
// definitions are brought up to the catalogue's.
func Seed(ctx context.Context, db store.Querier, service string, environ map[string]string) ([]Seeded, error) {
	var out []Seeded
	for _, d := range UsedBy(service) {
		s, err := seedOne(ctx, db, service, d, environ[d.Env])
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// CheckEnv checks the value env of the variable of d ("": unset).
func (d Def) CheckEnv(env string) error {
	if env == "" {
		return nil
	}
	if err := d.Check(env); err != nil {
		return fmt.Errorf("%s=%s: %w", d.Env, env, err)
	}
	return nil
}

// seedOne seeds d from env (its variable's value, "" when unset).
func seedOne(ctx context.Context, db store.Querier, service string, d Def, env string) (Seeded, error) {
	if err := d.CheckEnv(env); err != nil {
		return Seeded{}, err
	}
	s := Seeded{Key: d.Key, Env: env, From: d.Env, Stored: env}
	if env == "" {
		s.From, s.Stored = "default", d.Default
	}
	err := db.QueryRow(ctx, seedSQL, d.Key, s.Stored, d.Category, d.Description, d.Type, d.constraintsJSON(),
		service+" ("+s.From+")").Scan(&s.Inserted)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Seeded{}, mapError("seed "+d.Key, err)
	}
	if !s.Inserted {
		if err := db.QueryRow(ctx, `SELECT value FROM system_config WHERE key = $1`, d.Key).Scan(&s.Stored); err != nil {
			return Seeded{}, fmt.Errorf("read setting %s: %w", d.Key, err)
		}
	}
	return s, nil
}
