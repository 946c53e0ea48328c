package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultDatabaseURL is the local stack's database.
const DefaultDatabaseURL = "postgres://postgres@localhost:5432/dubflow?sslmode=disable"

// Env returns the variable's value or def when it is unset or empty. When
// the tests run on containers (BackendContainers: no AMQP_URL, DATABASE_URL
// or S3_ENDPOINT set and a Docker engine answers), those three come from the
// containers, started on first use.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	for _, b := range backendVars {
		if name == b && currentBackend() == BackendContainers {
			return containerEnv(name)
		}
	}
	return def
}

// Database is an isolated, migrated database for one test.
type Database struct {
	URL  string
	Pool *pgxpool.Pool
	Name string
}

// Postgres creates a fresh database on the server of DATABASE_URL, applies
// every migration, and drops it when the test ends.
func Postgres(t testing.TB) *Database {
	t.Helper()
	// First the server (on BackendContainers, the containers start now, which
	// may take minutes: that is not the 60 s of the database's creation).
	base := Env("DATABASE_URL", DefaultDatabaseURL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("testenv: parse DATABASE_URL: %v", err)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		t.Fatalf("testenv: connect to postgres (is the local stack up? run `make up` or scripts/stack.sh up): %v", err)
	}
	defer conn.Close(ctx)
	name := "dubflow_test_" + strings.ReplaceAll(uuid.NewString()[:18], "-", "")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	url := replaceDatabase(base, name)
	pool, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		closePool(t, pool, 30*time.Second)
		tidying.tidy(t, func() error { return dropDatabase(admin, name) })
	})
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return &Database{URL: url, Pool: pool, Name: name}
}

// dropDatabase drops database name through the server's admin database.
func dropDatabase(admin *pgx.ConnConfig, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("testenv: drop %s: %w", name, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("testenv: drop %s: %w", name, err)
	}
	return nil
}

// closePool closes pool, waiting at most wait for the connections a test
// still holds (an open transaction, a query nobody reads). pgxpool's Close
// waits for them forever: a test that failed while holding one would hang
// until the binary's -timeout and hide its own failure message under a
// goroutine dump. Past wait, the test is marked failed with the reason and
// the cleanup goes on (the database is dropped WITH (FORCE)).
func closePool(t testing.TB, pool *pgxpool.Pool, wait time.Duration) {
	closed := make(chan struct{})
	go func() {
		pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(wait):
		t.Errorf("testenv: %d connection(s) still held by the test %s after it ended: a transaction or a result left open", pool.Stat().AcquiredConns(), wait)
	}
}

// replaceDatabase swaps the database name in a postgres:// URL.
func replaceDatabase(url, name string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return url
	}
	query := ""
	if i := strings.Index(url, "?"); i >= 0 {
		query = url[i:]
	}
	user := cfg.User
	if cfg.Password != "" {
		user += ":" + cfg.Password
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s%s", user, cfg.Host, cfg.Port, name, query)
}
