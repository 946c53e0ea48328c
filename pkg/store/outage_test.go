package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors of a real Postgres that is cut off, gone or shutting down are an
// outage; errors of a statement, of a context and of other services are
// not.
func TestUnreachableTellsAnOutageFromAFailedStatement(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cut := testenv.CutProxy(t, db.URL)
	pool, err := pgxpool.New(ctx, cut.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	outages := map[string]error{}
	// A connection cut while a query runs, one cut before a query, then no
	// connection at all.
	running := make(chan error, 1)
	go func() { _, err := pool.Exec(ctx, `SELECT pg_sleep(30) /* cut me */`); running <- err }()
	waitActive(t, db.Pool, "cut me")
	cut.Cut()
	outages["cut under a running query"] = <-running
	if err := cut.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatalf("through the restored proxy: %v", err)
	}
	cut.Cut()
	_, outages["cut open connection"] = pool.Exec(ctx, `SELECT 1`)
	_, outages["connection refused"] = pool.Exec(ctx, `SELECT 1`)
	if err := cut.Restore(); err != nil {
		t.Fatal(err)
	}
	// The server ends the session (57P01), as a shutdown does.
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, outages["admin shutdown 57P01"] = conn.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
	conn.Release()

	for name, err := range outages {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !store.Unreachable(err) || !fault.IsUnavailable(store.MarkUnavailable(err)) {
			t.Errorf("%s: %v (%T) not classed as an outage", name, err, err)
		}
		t.Logf("outage %s: %v", name, err)
	}

	statements := map[string]error{}
	_, statements["syntax"] = db.Pool.Exec(ctx, `SELEC 1`)
	_, statements["invalid text"] = db.Pool.Exec(ctx, `SELECT $1::text`, "a\x00b")
	_, statements["division by zero"] = db.Pool.Exec(ctx, `SELECT 1/0`)
	short, cancelShort := context.WithTimeout(ctx, time.Millisecond)
	_, statements["context deadline"] = db.Pool.Exec(short, `SELECT pg_sleep(1)`)
	cancelShort()
	_, statements["http engine refused"] = http.Get("http://127.0.0.1:1/")
	statements["permanent"] = fault.Permanent(outages["connection refused"])
	for name, err := range statements {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if store.Unreachable(err) && !fault.IsPermanent(err) {
			t.Errorf("%s: %v (%T) classed as a database outage", name, err, err)
		}
		if fault.IsUnavailable(store.MarkUnavailable(err)) {
			t.Errorf("%s: %v marked unavailable", name, err)
		}
	}
	if store.MarkUnavailable(nil) != nil {
		t.Error("MarkUnavailable(nil) is not nil")
	}
	if err := store.MarkUnavailable(outages["connection refused"]); !errors.Is(err, outages["connection refused"]) {
		t.Errorf("the mark hides the cause: %v", err)
	}
}

// waitActive waits until a query containing marker runs on the server.
func waitActive(t *testing.T, pool *pgxpool.Pool, marker string) {
	t.Helper()
	testenv.EventuallyWithin(t, 30*time.Second, fmt.Sprintf("a query %q to start", marker), func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()`, marker).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}
