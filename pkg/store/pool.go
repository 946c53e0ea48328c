package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open connects to Postgres at url and checks the connection once: for
// commands, which should fail at once when the database is away.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return OpenWait(ctx, url, 0, nil)
}

// OpenWait connects to Postgres at url like Open, but while the server is
// unreachable or still starting it tries again with capped exponential
// backoff for up to wait (or until ctx ends), calling retrying before each
// pause: a service started before its database (a node reboot, a crashed
// Postgres recovering) waits for it instead of exiting. Errors no retry
// can fix — a malformed URL, a refused password, a missing database — end
// it at once.
func OpenWait(ctx context.Context, url string, wait time.Duration, retrying func(err error, next time.Duration)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		registerUUID(c.TypeMap())
		return nil
	}
	cfg.ConnConfig.Tracer = tracer{}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	deadline := time.Now().Add(wait)
	pause := 250 * time.Millisecond
	for {
		err := pool.Ping(ctx)
		if err == nil {
			return pool, nil
		}
		if !retryableConnect(err) || ctx.Err() != nil || time.Now().Add(pause).After(deadline) {
			pool.Close()
			return nil, fmt.Errorf("ping database: %w", err)
		}
		if retrying != nil {
			retrying(err, pause)
		}
		select {
		case <-ctx.Done():
			pool.Close()
			return nil, fmt.Errorf("ping database: %w (gave up: %w)", err, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// retryableConnect tells a database that is away or starting up (worth
// waiting for) from a configuration error (not).
func retryableConnect(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28000", "28P01", // invalid authorization, wrong password
			"3D000", // database does not exist
			"42501": // insufficient privilege
			return false
		}
		return true // 57P03 starting up, 53300 too many connections, 08xxx
	}
	return true // refused, reset, DNS, timeouts
}
