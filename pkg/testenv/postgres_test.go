package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// errorsTB records what a harness reports as a test's failure.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// A connection a failed test left acquired (an open transaction) makes the
// database's cleanup report it and go on, instead of waiting for it until
// the binary's -timeout.
func TestClosePoolReportsAConnectionLeftHeldInsteadOfHanging(t *testing.T) {
	db := Postgres(t)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rec := &errorsTB{TB: t}
	returned := make(chan struct{})
	go func() {
		closePool(rec, db.Pool, 200*time.Millisecond)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(Within(t, 30*time.Second)):
		t.Fatal("closePool still waits for the held connection")
	}
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "1 connection(s) still held") {
		t.Fatalf("closePool reported %q, want one error naming the held connection", rec.errs)
	}
}
