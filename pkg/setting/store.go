package setting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Setting is one setting as every door shows it (GET /api/config, dubctl
// config get): its definition and its value now.
type Setting struct {
	Key         string      `json:"key"`
	Value       string      `json:"value"`
	Category    string      `json:"category"`
	Description string      `json:"description"`
	Type        Type        `json:"type"`
	Constraints Constraints `json:"constraints"`
	Unit        string      `json:"unit"`
	Env         string      `json:"env"`
	Default     string      `json:"default"`
	UsedBy      []string    `json:"usedBy"`
	// UpdatedAt and UpdatedBy say when and by whom the value was set (a
	// service seeding it names itself and where the value came from);
	// null and "" for a key no service seeded yet: Value is its default
	// then.
	UpdatedAt *time.Time `json:"updatedAt"`
	UpdatedBy string     `json:"updatedBy"`
}

// of is d with no row: its default.
func of(d Def) Setting {
	return Setting{Key: d.Key, Value: d.Default, Category: d.Category, Description: d.Description, Type: d.Type,
		Constraints: d.Constraints(), Unit: d.Unit, Env: d.Env, Default: d.Default, UsedBy: d.UsedBy}
}

// List returns every setting of the catalogue with its value now.
func List(ctx context.Context, db store.Querier) ([]Setting, error) {
	rows, err := db.Query(ctx, `SELECT key, value, updated_at, updated_by FROM system_config`)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	type row struct {
		value, by string
		at        time.Time
	}
	stored := map[string]row{}
	var key string
	var r row
	if _, err := pgx.ForEachRow(rows, []any{&key, &r.value, &r.at, &r.by}, func() error {
		stored[key] = r
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	out := make([]Setting, len(Catalogue))
	for i, d := range Catalogue {
		out[i] = of(d)
		if r, ok := stored[d.Key]; ok {
			at := r.at.UTC()
			out[i].Value, out[i].UpdatedAt, out[i].UpdatedBy = r.value, &at, r.by
		}
	}
	return out, nil
}

// Get returns the setting named key with its value now.
func Get(ctx context.Context, db store.Querier, key string) (Setting, error) {
	d, err := lookup(key)
	if err != nil {
		return Setting{}, err
	}
	s := of(d)
	var at time.Time
	err = db.QueryRow(ctx, `SELECT value, updated_at, updated_by FROM system_config WHERE key = $1`, key).
		Scan(&s.Value, &at, &s.UpdatedBy)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s, nil
	case err != nil:
		return Setting{}, fmt.Errorf("read setting %s: %w", key, err)
	}
	at = at.UTC()
	s.UpdatedAt = &at
	return s, nil
}

// lookup is Lookup's definition, or Unknown(key).
func lookup(key string) (Def, error) {
	d, ok := Lookup(key)
	if !ok {
		return Def{}, Unknown(key)
	}
	return d, nil
}

// Unknown is the ErrUnknown every door answers for key, naming the keys
// there are.
func Unknown(key string) error { return fmt.Errorf("%w %q (one of %s)", ErrUnknown, key, Keys()) }

// upsertSQL writes a setting's row: its value and who set it ($1 key, $2
// value, $3 category, $4 description, $5 type, $6 constraints, $7 by).
const upsertSQL = `INSERT INTO system_config AS c (key, value, category, description, value_type, constraints, updated_by)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, category = EXCLUDED.category,
	    description = EXCLUDED.description, value_type = EXCLUDED.value_type, constraints = EXCLUDED.constraints,
	    updated_by = EXCLUDED.updated_by, updated_at = now()`

// Set changes the setting named key to value on behalf of by, after
// checking the value (Check; the database checks it again), and returns
// it. Running services read it within Poll.
func Set(ctx context.Context, db store.Querier, key, value, by string) (Setting, error) {
	d, err := lookup(key)
	if err != nil {
		return Setting{}, err
	}
	if err := d.Check(value); err != nil {
		return Setting{}, err
	}
	if _, err := db.Exec(ctx, upsertSQL, d.Key, value, d.Category, d.Description, d.Type, d.constraintsJSON(), by); err != nil {
		return Setting{}, mapError(fmt.Sprintf("set %s", key), err)
	}
	return Get(ctx, db, key)
}

// mapError turns the database's refusal of a value into ErrInvalid with
// its text; any other error is wrapped naming op.
func mapError(op string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23514" && pg.ConstraintName == "system_config_value" {
		return &invalidError{pg.Message}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// IntOf is the integer setting key as stored, or fallback while no service
// has seeded it yet (a door that reads it once, where it is used, rather
// than holding a Watch): a review's approval batches its lines by
// translate.batch_size, as asr does.
func IntOf(ctx context.Context, db store.Querier, key string, fallback int) (int, error) {
	s, err := Get(ctx, db, key)
	if err != nil {
		return 0, err
	}
	if s.UpdatedAt == nil {
		return fallback, nil
	}
	n, err := strconv.Atoi(s.Value)
	if err != nil {
		return 0, fmt.Errorf("setting %s: %q is not an integer", key, s.Value)
	}
	return n, nil
}
